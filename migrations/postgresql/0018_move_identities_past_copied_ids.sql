-- `idemhook store copy` into PostgreSQL moved the identity generators of
-- the tables of migrations 0001 to 0005 past the copied ids, but not those
-- of audit_log and outbox_attempts (0011): on a database made by such a
-- copy, the first console or CLI action and the first outbound attempt
-- recorded took id 1 again and failed on the primary key (the outbound
-- worker then sent an accepted notification again at every lease). The
-- copy now moves every identity column; this moves the two it missed on a
-- database already copied. A generator is only ever moved forward: one
-- already past its table's ids (rows deleted by gc) stays where it is.
-- Plain statements, no DO block, as the rest of the schema.
SELECT setval(pg_get_serial_sequence('audit_log', 'id'),
	GREATEST((SELECT COALESCE(max(id), 0) FROM audit_log) + 1,
		COALESCE((SELECT last_value + 1 FROM pg_sequences
			WHERE format('%I.%I', schemaname, sequencename)
				= pg_get_serial_sequence('audit_log', 'id')), 1)),
	false);
SELECT setval(pg_get_serial_sequence('outbox_attempts', 'id'),
	GREATEST((SELECT COALESCE(max(id), 0) FROM outbox_attempts) + 1,
		COALESCE((SELECT last_value + 1 FROM pg_sequences
			WHERE format('%I.%I', schemaname, sequencename)
				= pg_get_serial_sequence('outbox_attempts', 'id')), 1)),
	false);
