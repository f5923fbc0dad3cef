/* wechatpay_fixture.h: WeChat Pay API v3 notifications as the provider builds
 * them, for the unit and end-to-end tests: the resource encrypted with
 * AES-256-GCM and the SHA256withRSA signature over "ts\nnonce\nbody\n".
 * Include after cmocka.h. */
#ifndef IDEMHOOK_TEST_WECHATPAY_FIXTURE_H
#define IDEMHOOK_TEST_WECHATPAY_FIXTURE_H

#include <string.h>

#include <openssl/evp.h>

#include "buf.h"
#include "crypto.h"

/* A notification body with plaintext encrypted under the 32-byte API v3 key. */
static inline char *wx_fixture_body(const char *id, const char *event_type, const char *plaintext,
				    const char *key, const char *nonce)
{
	unsigned char ct[4096];
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	const char *aad = "transaction";
	char *b64 = NULL;
	int n = 0;
	int f = 0;
	struct buf b;

	assert_true(strlen(plaintext) < sizeof(ct) - 16);
	assert_int_equal(EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, (const unsigned char *)key,
					    (const unsigned char *)nonce),
			 1);
	assert_int_equal(EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)), 1);
	assert_int_equal(
		EVP_EncryptUpdate(ctx, ct, &n, (const unsigned char *)plaintext, (int)strlen(plaintext)), 1);
	assert_int_equal(EVP_EncryptFinal_ex(ctx, ct + n, &f), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, ct + n + f), 1);
	EVP_CIPHER_CTX_free(ctx);
	assert_int_equal(crypto_base64_encode(ct, (size_t)(n + f + 16), &b64, NULL), 0);
	buf_init(&b, 0);
	buf_printf(&b,
		   "{\"id\":\"%s\",\"create_time\":\"2024-12-02T10:00:00+08:00\",\"resource_type\":"
		   "\"encrypt-resource\",\"event_type\":\"%s\",\"summary\":\"ok\",\"resource\":{"
		   "\"original_type\":\"transaction\",\"algorithm\":\"AEAD_AES_256_GCM\",\"ciphertext\":"
		   "\"%s\",\"associated_data\":\"%s\",\"nonce\":\"%s\"}}",
		   id, event_type, b64, aad, nonce);
	free(b64);
	return buf_take(&b, NULL);
}

/* The base64 Wechatpay-Signature of body at ts with nonce (malloc'd). */
static inline char *wx_fixture_sign(EVP_PKEY *k, const char *ts, const char *nonce, const char *body)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char sig[512];
	size_t n = sizeof(sig);
	char *b64 = NULL;
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b, "%s\n%s\n%s\n", ts, nonce, body);
	assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k), 1);
	assert_int_equal(EVP_DigestSign(ctx, sig, &n, (const unsigned char *)b.buf_data, b.buf_len), 1);
	EVP_MD_CTX_free(ctx);
	buf_finish(&b);
	assert_int_equal(crypto_base64_encode(sig, n, &b64, NULL), 0);
	return b64;
}

#endif
