-- Cheaper CHECK constraints (issue 24, docs/benchmarks.md, "The writer's CPU
-- per unique callback"): SQLite evaluates `col IN (a, b, c)` with three or
-- more constants by building a temporary b-tree of the list every time a
-- statement that checks it runs (a pager and its cache allocated, filled,
-- probed once and freed), about 3 us a row on this machine; a unique
-- payment ran four such checks on the writer. The same checks written as
-- `col = a OR col = b OR ...` are compared in place. Every row satisfies
-- both forms alike (NULL included), and the file's format is the same, so
-- the tables' definitions are rewritten in place as SQLite documents for
-- changing a CHECK constraint (https://sqlite.org/lang_altertable.html,
-- "otheralter"), without copying any row: writable_schema, then RESET
-- reloads this connection's schema (a typo fails here, and the migration
-- rolls back), then a table made and dropped bumps the schema cookie so
-- that other connections read the new definitions too.
-- Lists of two constants are left as they are: SQLite compares those in
-- place already.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql,
	'status IN (''processing'', ''done'', ''failed'')',
	'status = ''processing'' OR status = ''done'' OR status = ''failed''')
	WHERE type = 'table' AND name = 'idempotency_records';
UPDATE sqlite_schema SET sql = replace(replace(sql,
	'status IN (''pending'', ''authorized'', ''paid'', ''partially_refunded'', ''refunded'',
			''disputed'', ''cancelled'', ''expired'')',
	'status = ''pending'' OR status = ''authorized'' OR status = ''paid''
			OR status = ''partially_refunded'' OR status = ''refunded'' OR status = ''disputed''
			OR status = ''cancelled'' OR status = ''expired'''),
	'fulfillment_status IN (''pending'', ''notified'', ''failed'', ''compensated'')',
	'fulfillment_status = ''pending'' OR fulfillment_status = ''notified''
			OR fulfillment_status = ''failed'' OR fulfillment_status = ''compensated''')
	WHERE type = 'table' AND name = 'orders';
UPDATE sqlite_schema SET sql = replace(sql,
	'reason IN (''award'', ''clawback'', ''restore'')',
	'reason = ''award'' OR reason = ''clawback'' OR reason = ''restore''')
	WHERE type = 'table' AND name = 'points_ledger';
UPDATE sqlite_schema SET sql = replace(sql,
	'status IN (''open'', ''won'', ''lost'')',
	'status = ''open'' OR status = ''won'' OR status = ''lost''')
	WHERE type = 'table' AND name = 'disputes';
UPDATE sqlite_schema SET sql = replace(sql,
	'outcome IN (''opened'', ''won'', ''lost'')',
	'outcome = ''opened'' OR outcome = ''won'' OR outcome = ''lost''')
	WHERE type = 'table' AND name = 'dispute_steps';
UPDATE sqlite_schema SET sql = replace(replace(replace(sql,
	'compensation IN (''none'', ''refund'', ''manual'')',
	'compensation = ''none'' OR compensation = ''refund'' OR compensation = ''manual'''),
	'comp_state IN (''none'', ''queued'', ''flagged'', ''done'')',
	'comp_state = ''none'' OR comp_state = ''queued'' OR comp_state = ''flagged''
			OR comp_state = ''done'''),
	'status IN (''pending'', ''delivering'', ''retry_wait'', ''succeeded'', ''dead'', ''cancelled'')',
	'status = ''pending'' OR status = ''delivering'' OR status = ''retry_wait''
			OR status = ''succeeded'' OR status = ''dead'' OR status = ''cancelled''')
	WHERE type = 'table' AND name = 'outbox';
PRAGMA writable_schema = RESET;
CREATE TABLE checks_in_place_0014 (x);
DROP TABLE checks_in_place_0014;
