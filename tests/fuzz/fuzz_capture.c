/* fuzz_capture.c: the capture-file reader (replay's input). A capture it
 * accepts, written again, reads back as the same request. */
#include "buf.h"
#include "capture.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct capture_record rec;
	struct capture_record again;
	char err[256];
	struct buf b;
	size_t i;

	if (capture_parse(data, size, &rec, err, sizeof(err)) < 0) {
		FUZZ_CHECK(err[0] != '\0');
		return 0;
	}
	buf_init(&b, 0);
	if (capture_format(&b, rec.cr_provider, &rec.cr_req, rec.cr_rejected == 1) == 0) {
		if (capture_parse(b.buf_data, b.buf_len, &again, err, sizeof(err)) < 0) {
			fprintf(stderr, "fuzz: the capture written again does not read back: %s\n%.*s\n",
			        err, (int)b.buf_len, b.buf_data);
			abort();
		}
		FUZZ_CHECK(strcmp(again.cr_provider, rec.cr_provider) == 0);
		FUZZ_CHECK(strcmp(again.cr_req.hr_method, rec.cr_req.hr_method) == 0);
		FUZZ_CHECK(strcmp(again.cr_req.hr_url, rec.cr_req.hr_url) == 0);
		FUZZ_CHECK(again.cr_req.hr_body_len == rec.cr_req.hr_body_len);
		FUZZ_CHECK(rec.cr_req.hr_body_len == 0 ||
		           memcmp(again.cr_req.hr_body, rec.cr_req.hr_body, rec.cr_req.hr_body_len) ==
		                   0);
		FUZZ_CHECK(again.cr_req.hr_n_headers == rec.cr_req.hr_n_headers);
		for (i = 0; i < rec.cr_req.hr_n_headers; i++) {
			FUZZ_CHECK(strcmp(again.cr_req.hr_headers[i].hh_name,
			                  rec.cr_req.hr_headers[i].hh_name) == 0);
			FUZZ_CHECK(strcmp(again.cr_req.hr_headers[i].hh_value,
			                  rec.cr_req.hr_headers[i].hh_value) == 0);
		}
		capture_record_finish(&again);
	}
	buf_finish(&b);
	capture_record_finish(&rec);
	return 0;
}
