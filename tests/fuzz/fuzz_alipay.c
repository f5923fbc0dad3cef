/* fuzz_alipay.c: the Alipay profile behind a valid RSA2 signature (an Alipay
 * key made at start). The input is the form; when every field decodes, the
 * harness signs it as Alipay does (decoded fields sorted by name, without
 * sign, sign_type and empty values) and appends sign=, so verification
 * passes and the form handling behind it is reached. */
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "buf.h"
#include "crypto.h"
#include "fuzz.h"
#include "text.h"

extern const struct provider provider_alipay;

#define FUZZ_ALIPAY_FIELDS_MAX 128

struct fuzz_field {
	char *ff_key;
	char *ff_value;
};

static struct pt_instance fuzz_pi;
static EVP_PKEY *fuzz_key;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const kv[] = {"app_id",    "2021001144680325",
	                                 "seller_id", "2088031940831575",
	                                 "public_key", "env:IDEMHOOK_FUZZ_ALIPAY_PUB",
	                                 NULL};
	unsigned char *der = NULL;
	char *b64 = NULL;
	int n;

	fuzz_quiet();
	fuzz_key = EVP_RSA_gen(1024);
	n = fuzz_key != NULL ? i2d_PUBKEY(fuzz_key, &der) : -1;
	FUZZ_CHECK(n > 0 && crypto_base64_encode(der, (size_t)n, &b64, NULL) == 0);
	setenv("IDEMHOOK_FUZZ_ALIPAY_PUB", b64, 1);
	OPENSSL_free(der);
	free(b64);
	fuzz_instance(&fuzz_pi, &provider_alipay, kv);
	return 0;
}

static int fuzz_field_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fuzz_field *)a)->ff_key, ((const struct fuzz_field *)b)->ff_key);
}

/* The fields of data decoded, or -1 when one does not decode. */
static int fuzz_fields(const uint8_t *data, size_t size, struct fuzz_field *f, size_t *ret_n)
{
	const char *s = (const char *)data;
	size_t i = 0;
	size_t n = 0;

	while (i < size) {
		const char *amp = memchr(s + i, '&', size - i);
		size_t len = amp != NULL ? (size_t)(amp - (s + i)) : size - i;
		const char *eq = memchr(s + i, '=', len);

		if (len > 0) {
			if (eq == NULL || n >= FUZZ_ALIPAY_FIELDS_MAX) {
				*ret_n = n;
				return -1;
			}
			f[n].ff_key = text_form_decode(s + i, (size_t)(eq - (s + i)));
			f[n].ff_value = text_form_decode(eq + 1, len - (size_t)(eq - (s + i)) - 1);
			n++;
			if (f[n - 1].ff_key == NULL || f[n - 1].ff_value == NULL) {
				*ret_n = n;
				return -1;
			}
		}
		i += len + 1;
	}
	*ret_n = n;
	return 0;
}

static char *fuzz_sign(struct fuzz_field *f, size_t n)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char sig[512];
	size_t sig_len = sizeof(sig);
	char *b64 = NULL;
	struct buf content;
	size_t i;

	qsort(f, n, sizeof(*f), fuzz_field_cmp);
	buf_init(&content, 0);
	buf_puts(&content, "");
	for (i = 0; i < n; i++) {
		if (strcmp(f[i].ff_key, "sign") == 0 || strcmp(f[i].ff_key, "sign_type") == 0 ||
		    f[i].ff_value[0] == '\0') {
			continue;
		}
		buf_printf(&content, "%s%s=%s", content.buf_len > 0 ? "&" : "", f[i].ff_key,
		           f[i].ff_value);
	}
	FUZZ_CHECK(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, fuzz_key) == 1);
	FUZZ_CHECK(EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)content.buf_data,
	                          content.buf_len) == 1);
	FUZZ_CHECK(crypto_base64_encode(sig, sig_len, &b64, NULL) == 0);
	EVP_MD_CTX_free(ctx);
	buf_finish(&content);
	return b64;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_field *f = calloc(FUZZ_ALIPAY_FIELDS_MAX, sizeof(*f));
	struct pt_request r;
	struct buf form;
	size_t n = 0;
	size_t i;

	FUZZ_CHECK(f != NULL);
	buf_init(&form, 0);
	FUZZ_CHECK(buf_append(&form, data, size) == 0 && buf_puts(&form, "") == 0);
	if (fuzz_fields(data, size, f, &n) == 0) {
		char *sig = fuzz_sign(f, n);
		const char *p;

		buf_puts(&form, "&sign=");
		/* base64 in a form: '+', '/' and '=' escaped. */
		for (p = sig; *p != '\0'; p++) {
			if (*p == '+' || *p == '/' || *p == '=') {
				buf_printf(&form, "%%%02X", (unsigned char)*p);
			} else {
				buf_append(&form, p, 1);
			}
		}
		free(sig);
	}
	for (i = 0; i < n; i++) {
		free(f[i].ff_key);
		free(f[i].ff_value);
	}
	free(f);
	pt_request_init(&r, form.buf_data, form.buf_len);
	pt_request_header(&r, "Content-Type", "application/x-www-form-urlencoded; charset=utf-8");
	fuzz_receive(&fuzz_pi, &r);
	pt_request_finish(&r);
	buf_finish(&form);
	return 0;
}
