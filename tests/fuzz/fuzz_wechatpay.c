/* fuzz_wechatpay.c: the WeChat Pay profile behind a valid SHA256withRSA
 * signature (a platform key made at start). An input of even length is the
 * notification body, signed as it is; an odd one is the resource plaintext,
 * encrypted with the API v3 key into a notification (a payment when the
 * length is 1 mod 4, a refund when 3), so both JSON readers are reached. */
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "buf.h"
#include "crypto.h"
#include "fuzz.h"

extern const struct provider provider_wechatpay;

#define FUZZ_WX_SERIAL "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
#define FUZZ_WX_APIV3 "abcdefghijklmnopqrstuvwxyz012345"
#define FUZZ_WX_NONCE "fuzzfuzzfuzz"

static struct pt_instance fuzz_pi;
static EVP_PKEY *fuzz_key;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const kv[] = {"platform_key", FUZZ_WX_SERIAL " env:IDEMHOOK_FUZZ_WX_PUB",
	                                 "apiv3_key",    FUZZ_WX_APIV3,
	                                 "mchid",        "1900000001",
	                                 NULL};
	BIO *bio = BIO_new(BIO_s_mem());
	char *pem = NULL;
	char *copy;
	long n;

	fuzz_quiet();
	/* 1024 bits: signing every input at 2048 would halve the executions,
	 * and the key size is not what is being fuzzed. */
	fuzz_key = EVP_RSA_gen(1024);
	FUZZ_CHECK(fuzz_key != NULL && bio != NULL && PEM_write_bio_PUBKEY(bio, fuzz_key) == 1);
	n = BIO_get_mem_data(bio, &pem);
	copy = strndup(pem, (size_t)n);
	FUZZ_CHECK(copy != NULL);
	setenv("IDEMHOOK_FUZZ_WX_PUB", copy, 1);
	free(copy);
	BIO_free(bio);
	fuzz_instance(&fuzz_pi, &provider_wechatpay, kv);
	return 0;
}

/* base64 AES-256-GCM of plain (ciphertext and tag), AAD "transaction". */
static char *fuzz_encrypt(const uint8_t *plain, size_t len)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	unsigned char *ct = malloc(len + 16);
	char *b64 = NULL;
	int n = 0;
	int f = 0;

	FUZZ_CHECK(ctx != NULL && ct != NULL);
	FUZZ_CHECK(EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL,
	                              (const unsigned char *)FUZZ_WX_APIV3,
	                              (const unsigned char *)FUZZ_WX_NONCE) == 1);
	FUZZ_CHECK(EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)"transaction", 11) == 1);
	FUZZ_CHECK(EVP_EncryptUpdate(ctx, ct, &n, plain, (int)len) == 1);
	FUZZ_CHECK(EVP_EncryptFinal_ex(ctx, ct + n, &f) == 1);
	FUZZ_CHECK(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, ct + n + f) == 1);
	FUZZ_CHECK(crypto_base64_encode(ct, (size_t)(n + f) + 16, &b64, NULL) == 0);
	EVP_CIPHER_CTX_free(ctx);
	free(ct);
	return b64;
}

/* The base64 Wechatpay-Signature over "ts\nnonce\nbody\n". */
static char *fuzz_sign(const char *ts, const void *body, size_t len)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char sig[512];
	size_t sig_len = sizeof(sig);
	char *b64 = NULL;
	struct buf b;

	buf_init(&b, 0);
	FUZZ_CHECK(buf_printf(&b, "%s\n%s\n", ts, "nonce-fuzz") == 0 &&
	           buf_append(&b, body, len) == 0 && buf_puts(&b, "\n") == 0);
	FUZZ_CHECK(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, fuzz_key) == 1);
	FUZZ_CHECK(EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)b.buf_data,
	                          b.buf_len) == 1);
	FUZZ_CHECK(crypto_base64_encode(sig, sig_len, &b64, NULL) == 0);
	EVP_MD_CTX_free(ctx);
	buf_finish(&b);
	return b64;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pt_request r;
	struct buf body;
	char ts[24];
	char *sig;

	buf_init(&body, 0);
	if (size % 2 == 0) {
		FUZZ_CHECK(buf_append(&body, data, size) == 0 && buf_puts(&body, "") == 0);
	} else {
		char *ct = fuzz_encrypt(data, size);

		FUZZ_CHECK(buf_printf(&body,
		                      "{\"id\":\"EV-fuzz\",\"create_time\":\"2024-12-02T10:00:00+08:00\","
		                      "\"resource_type\":\"encrypt-resource\",\"event_type\":\"%s\","
		                      "\"summary\":\"ok\",\"resource\":{\"original_type\":\"transaction\","
		                      "\"algorithm\":\"AEAD_AES_256_GCM\",\"ciphertext\":\"%s\","
		                      "\"associated_data\":\"transaction\",\"nonce\":\"" FUZZ_WX_NONCE
		                      "\"}}",
		                      size % 4 == 1 ? "TRANSACTION.SUCCESS" : "REFUND.SUCCESS",
		                      ct) == 0);
		free(ct);
	}
	snprintf(ts, sizeof(ts), "%d", FUZZ_NOW);
	sig = fuzz_sign(ts, body.buf_data, body.buf_len);
	pt_request_init(&r, body.buf_data, body.buf_len);
	pt_request_header(&r, "Wechatpay-Timestamp", ts);
	pt_request_header(&r, "Wechatpay-Nonce", "nonce-fuzz");
	pt_request_header(&r, "Wechatpay-Signature", sig);
	pt_request_header(&r, "Wechatpay-Serial", FUZZ_WX_SERIAL);
	fuzz_receive(&fuzz_pi, &r);
	pt_request_finish(&r);
	free(sig);
	buf_finish(&body);
	return 0;
}
