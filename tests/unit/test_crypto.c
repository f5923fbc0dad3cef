/* test_crypto.c: unit tests for the OpenSSL wrappers and encodings in crypto.c. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "crypto.h"

static void hmac_hex(const char *key, const void *data, size_t len,
                     char out[2 * CRYPTO_HMAC_MAX + 1])
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	size_t n = 0;

	assert_int_equal(crypto_hmac(CRYPTO_SHA256, key, strlen(key), data, len, mac, &n), 0);
	assert_int_equal(n, 32);
	crypto_hex_encode(mac, n, out);
}

/* Vectors from stripe-node test/crypto/helpers.ts (HMAC-SHA256, key "test_secret"). */
static void test_crypto_hmac_sha256_matches_stripe_published_vectors(void **state)
{
	static const unsigned char smiley[] = {0xf0, 0x9f, 0x98, 0x80};
	const char *obj = "{\"obj1\":\"hello\",\"obj2\":\"world\"}";
	char hex[2 * CRYPTO_HMAC_MAX + 1];

	(void)state;
	hmac_hex("test_secret", "", 0, hex);
	assert_string_equal(hex,
	                    "f7f9bd47fb987337b5796fdc1fdb9ba221d0d5396814bfcaf9521f43fd8927fd");
	hmac_hex("test_secret", obj, strlen(obj), hex);
	assert_string_equal(hex,
	                    "bebb1a643997f419b315ddba19e6f5411e1ce7f810ba6d3617ce72823092f363");
	hmac_hex("test_secret", smiley, sizeof(smiley), hex);
	assert_string_equal(hex,
	                    "837da296d05c4fe31f61d5d7ead035099d9585a5bcde87de952012a78f0b0c43");
}

/* HMAC-SHA256 with an empty key over an empty message (a well-known value):
 * an empty key must not mean "keep the previous key". */
static void test_crypto_hmac_with_an_empty_key_is_still_keyed(void **state)
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	char hex[2 * CRYPTO_HMAC_MAX + 1];
	size_t n = 0;

	(void)state;
	assert_int_equal(crypto_hmac(CRYPTO_SHA256, "k", 1, "x", 1, mac, &n), 0);
	assert_int_equal(crypto_hmac(CRYPTO_SHA256, "", 0, "", 0, mac, &n), 0);
	crypto_hex_encode(mac, n, hex);
	assert_string_equal(hex,
	                    "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

/* RFC 4231 test case 2 for SHA-512. */
static void test_crypto_hmac_sha512_matches_rfc4231(void **state)
{
	const char *data = "what do ya want for nothing?";
	unsigned char mac[CRYPTO_HMAC_MAX];
	char hex[2 * CRYPTO_HMAC_MAX + 1];
	size_t n = 0;

	(void)state;
	assert_int_equal(crypto_hmac(CRYPTO_SHA512, "Jefe", 4, data, strlen(data), mac, &n), 0);
	assert_int_equal(n, 64);
	crypto_hex_encode(mac, n, hex);
	assert_string_equal(hex, "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549"
	                         "758bf75c05a994a6d034f"
	                         "65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737");
}

/* A MAC over spans is the MAC of their concatenation, whatever the cut; and
 * a thread's reused context never carries a key or a digest from one call
 * to the next (keys and digests alternate here, on one thread and on two). */
static void *hmac_spans_check(void *arg)
{
	static const char *const keys[] = {"whsec_one", "", "a much longer secret than the others"};
	const char *text = "1700000000.{\"id\":\"evt_1\",\"object\":\"event\"}";
	size_t len = strlen(text);
	int *failures = arg;
	size_t round;

	for (round = 0; round < 30; round++) {
		const char *key = keys[round % 3];
		enum crypto_hash hash = round % 2 == 0 ? CRYPTO_SHA256 : CRYPTO_SHA512;
		unsigned char whole[CRYPTO_HMAC_MAX];
		unsigned char parts[CRYPTO_HMAC_MAX];
		size_t n_whole = 0;
		size_t n_parts = 0;
		size_t cut = round % (len + 1);
		struct crypto_span spans[3] = {
		        {.cs_data = text, .cs_len = cut / 2},
		        {.cs_data = text + cut / 2, .cs_len = cut - cut / 2},
		        {.cs_data = text + cut, .cs_len = len - cut},
		};

		if (crypto_hmac(hash, key, strlen(key), text, len, whole, &n_whole) < 0 ||
		    crypto_hmac_spans(hash, key, strlen(key), spans, 3, parts, &n_parts) < 0 ||
		    n_whole != (hash == CRYPTO_SHA256 ? 32u : 64u) || n_parts != n_whole ||
		    memcmp(whole, parts, n_whole) != 0) {
			(*failures)++;
		}
	}
	return NULL;
}

static void test_crypto_hmac_spans_equal_the_mac_of_the_whole(void **state)
{
	unsigned char mac[CRYPTO_HMAC_MAX];
	char hex[2 * CRYPTO_HMAC_MAX + 1];
	const char *obj = "{\"obj1\":\"hello\",\"obj2\":\"world\"}";
	struct crypto_span spans[2] = {{.cs_data = obj, .cs_len = 9},
	                               {.cs_data = obj + 9, .cs_len = strlen(obj) - 9}};
	int failures[2] = {0, 0};
	pthread_t th;
	size_t n = 0;

	(void)state;
	/* stripe-node's vector again, in two pieces, after a MAC with another key. */
	assert_int_equal(crypto_hmac(CRYPTO_SHA512, "Jefe", 4, "x", 1, mac, &n), 0);
	assert_int_equal(crypto_hmac_spans(CRYPTO_SHA256, "test_secret", 11, spans, 2, mac, &n), 0);
	crypto_hex_encode(mac, n, hex);
	assert_string_equal(hex,
	                    "bebb1a643997f419b315ddba19e6f5411e1ce7f810ba6d3617ce72823092f363");
	assert_int_equal(pthread_create(&th, NULL, hmac_spans_check, &failures[1]), 0);
	hmac_spans_check(&failures[0]);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(failures[0], 0);
	assert_int_equal(failures[1], 0);
}

static void test_crypto_sha256_of_abc_is_the_fips_value(void **state)
{
	unsigned char d[CRYPTO_SHA256_LEN];
	char hex[2 * CRYPTO_SHA256_LEN + 1];

	(void)state;
	crypto_sha256("abc", 3, d);
	crypto_hex_encode(d, sizeof(d), hex);
	assert_string_equal(hex,
	                    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	/* The thread's context starts afresh for each digest: the empty text,
	 * then "abc" again, give their own values. */
	crypto_sha256("", 0, d);
	crypto_hex_encode(d, sizeof(d), hex);
	assert_string_equal(hex,
	                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	crypto_sha256("abc", 3, d);
	crypto_hex_encode(d, sizeof(d), hex);
	assert_string_equal(hex,
	                    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_crypto_equal_compares_length_and_content(void **state)
{
	(void)state;
	assert_int_equal(crypto_equal("abc", 3, "abc", 3), 1);
	assert_int_equal(crypto_equal("abc", 3, "abd", 3), 0);
	assert_int_equal(crypto_equal("abc", 3, "abcd", 4), 0);
	assert_int_equal(crypto_equal("", 0, "", 0), 1);
}

static void test_crypto_hex_decode_accepts_both_cases_and_rejects_junk(void **state)
{
	unsigned char *out = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(crypto_hex_decode("DFb1", 4, &out, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(out[0], 0xdf);
	assert_int_equal(out[1], 0xb1);
	free(out);
	assert_int_equal(crypto_hex_decode("abc", 3, &out, &n), -1);
	assert_int_equal(crypto_hex_decode("zz", 2, &out, &n), -1);
}

static void test_crypto_base64_round_trips_every_tail_length(void **state)
{
	const char *cases[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *e = NULL;
		unsigned char *d = NULL;
		size_t n = 0;

		assert_int_equal(crypto_base64_encode(cases[i], strlen(cases[i]), &e, &n), 0);
		assert_string_equal(e, enc[i]);
		assert_int_equal(n, strlen(enc[i]));
		assert_int_equal(crypto_base64_decode(e, n, &d, &n), 0);
		assert_int_equal(n, strlen(cases[i]));
		assert_memory_equal(d, cases[i], n);
		free(e);
		free(d);
	}
}

static void test_crypto_base64_decode_takes_missing_padding_and_refuses_junk(void **state)
{
	unsigned char *d = NULL;
	size_t n = 0;

	(void)state;
	assert_int_equal(crypto_base64_decode("Zm8", 3, &d, &n), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(d, "fo", 2);
	free(d);
	assert_int_equal(crypto_base64_decode("Zm 8", 4, &d, &n), -1);
	assert_int_equal(crypto_base64_decode("Z", 1, &d, &n), -1);
	assert_int_equal(crypto_base64_decode("Zm8==", 5, &d, &n), -1);
	assert_int_equal(crypto_base64_decode("Z===", 4, &d, &n), -1);
	assert_int_equal(crypto_base64_decode("Zm9=", 4, &d, &n), -1);
}

static void test_crypto_uuid4_has_version_and_variant(void **state)
{
	char a[37];
	char b[37];

	(void)state;
	assert_int_equal(crypto_uuid4(a), 0);
	assert_int_equal(crypto_uuid4(b), 0);
	assert_int_equal(strlen(a), 36);
	assert_int_equal(a[8], '-');
	assert_int_equal(a[14], '4');
	assert_non_null(strchr("89ab", a[19]));
	assert_string_not_equal(a, b);
}

/* RSA: a key generated at test time, signed with OpenSSL directly. */
static EVP_PKEY *test_rsa_key(void)
{
	EVP_PKEY *k = EVP_RSA_gen(2048);

	assert_non_null(k);
	return k;
}

static char *test_pubkey_pem(EVP_PKEY *k)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *p = NULL;
	char *out;
	long n;

	assert_int_equal(PEM_write_bio_PUBKEY(bio, k), 1);
	n = BIO_get_mem_data(bio, &p);
	out = malloc((size_t)n + 1);
	memcpy(out, p, (size_t)n);
	out[n] = '\0';
	BIO_free(bio);
	return out;
}

static unsigned char *test_rsa_sign(EVP_PKEY *k, const char *data, size_t *ret_len)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char *sig;
	size_t n = 0;

	assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, k), 1);
	assert_int_equal(EVP_DigestSign(ctx, NULL, &n, (const unsigned char *)data, strlen(data)),
	                 1);
	sig = malloc(n);
	assert_int_equal(EVP_DigestSign(ctx, sig, &n, (const unsigned char *)data, strlen(data)),
	                 1);
	EVP_MD_CTX_free(ctx);
	*ret_len = n;
	return sig;
}

static void test_crypto_rsa_verify_accepts_pem_and_base64_der_and_refuses_changes(void **state)
{
	EVP_PKEY *k = test_rsa_key();
	EVP_PKEY *other = test_rsa_key();
	char *pem = test_pubkey_pem(k);
	char *other_pem = test_pubkey_pem(other);
	unsigned char *der = NULL;
	char *der_b64 = NULL;
	struct crypto_pubkey *pk;
	struct crypto_pubkey *pk2;
	struct crypto_pubkey *wrong;
	unsigned char *sig;
	size_t sig_len;
	int der_len;

	(void)state;
	sig = test_rsa_sign(k, "hello", &sig_len);
	pk = crypto_pubkey_load(pem, strlen(pem));
	assert_non_null(pk);
	der_len = i2d_PUBKEY(k, &der);
	assert_true(der_len > 0);
	assert_int_equal(crypto_base64_encode(der, (size_t)der_len, &der_b64, NULL), 0);
	pk2 = crypto_pubkey_load(der_b64, strlen(der_b64));
	assert_non_null(pk2);
	wrong = crypto_pubkey_load(other_pem, strlen(other_pem));
	assert_non_null(wrong);

	assert_int_equal(crypto_rsa_sha256_verify(pk, "hello", 5, sig, sig_len), 1);
	assert_int_equal(crypto_rsa_sha256_verify(pk2, "hello", 5, sig, sig_len), 1);
	assert_int_equal(crypto_rsa_sha256_verify(pk, "hellp", 5, sig, sig_len), 0);
	assert_int_equal(crypto_rsa_sha256_verify(wrong, "hello", 5, sig, sig_len), 0);
	sig[10] ^= 1;
	assert_int_equal(crypto_rsa_sha256_verify(pk, "hello", 5, sig, sig_len), 0);
	assert_int_equal(crypto_rsa_sha256_verify(pk, "hello", 5, sig, 3), 0);
	assert_null(crypto_pubkey_load("not a key", 9));

	crypto_pubkey_destroy(pk);
	crypto_pubkey_destroy(pk2);
	crypto_pubkey_destroy(wrong);
	crypto_pubkey_destroy(NULL);
	OPENSSL_free(der);
	free(der_b64);
	free(sig);
	free(pem);
	free(other_pem);
	EVP_PKEY_free(k);
	EVP_PKEY_free(other);
}

/* WeChat Pay platform certificates: the key inside a PEM X.509 certificate. */
static void test_crypto_pubkey_load_takes_the_key_from_a_certificate(void **state)
{
	EVP_PKEY *k = test_rsa_key();
	X509 *cert = X509_new();
	BIO *bio = BIO_new(BIO_s_mem());
	struct crypto_pubkey *pk;
	unsigned char *sig;
	size_t sig_len;
	char *pem = NULL;
	long n;

	(void)state;
	assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(cert), 0x5157), 1);
	assert_non_null(X509_gmtime_adj(X509_getm_notBefore(cert), 0));
	assert_non_null(X509_gmtime_adj(X509_getm_notAfter(cert), 3600));
	assert_int_equal(X509_set_pubkey(cert, k), 1);
	assert_int_equal(X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
						    (const unsigned char *)"Tenpay.com Root CA", -1, -1, 0),
			 1);
	assert_int_equal(X509_set_issuer_name(cert, X509_get_subject_name(cert)), 1);
	assert_true(X509_sign(cert, k, EVP_sha256()) > 0);
	assert_int_equal(PEM_write_bio_X509(bio, cert), 1);
	n = BIO_get_mem_data(bio, &pem);
	pk = crypto_pubkey_load(pem, (size_t)n);
	assert_non_null(pk);
	sig = test_rsa_sign(k, "platform", &sig_len);
	assert_int_equal(crypto_rsa_sha256_verify(pk, "platform", 8, sig, sig_len), 1);
	assert_int_equal(crypto_rsa_sha256_verify(pk, "platforn", 8, sig, sig_len), 0);
	crypto_pubkey_destroy(pk);
	free(sig);
	BIO_free(bio);
	X509_free(cert);
	EVP_PKEY_free(k);
}

#define TEST_CA_PATH_MAX 256

/* text written to a new file under $TMPDIR (or /tmp); its path in path. */
static void test_ca_file_write(char path[TEST_CA_PATH_MAX], const char *text)
{
	const char *tmp = getenv("TMPDIR");
	FILE *f;
	int fd;

	snprintf(path, TEST_CA_PATH_MAX, "%s/idemhook-ca-XXXXXX", tmp != NULL ? tmp : "/tmp");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A self-signed certificate and its key, PEM. */
static void test_ca_file_pems(char **ret_cert, char **ret_key)
{
	EVP_PKEY *k = test_rsa_key();
	X509 *cert = X509_new();
	BIO *cb = BIO_new(BIO_s_mem());
	BIO *kb = BIO_new(BIO_s_mem());
	char *data = NULL;
	long n;

	assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(cert), 0x5158), 1);
	assert_non_null(X509_gmtime_adj(X509_getm_notBefore(cert), 0));
	assert_non_null(X509_gmtime_adj(X509_getm_notAfter(cert), 3600));
	assert_int_equal(X509_set_pubkey(cert, k), 1);
	assert_int_equal(X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
	                                            (const unsigned char *)"Private CA", -1, -1, 0),
	                 1);
	assert_int_equal(X509_set_issuer_name(cert, X509_get_subject_name(cert)), 1);
	assert_true(X509_sign(cert, k, EVP_sha256()) > 0);
	assert_int_equal(PEM_write_bio_X509(cb, cert), 1);
	assert_int_equal(PEM_write_bio_PrivateKey(kb, k, NULL, NULL, 0, NULL, NULL), 1);
	n = BIO_get_mem_data(cb, &data);
	*ret_cert = strndup(data, (size_t)n);
	n = BIO_get_mem_data(kb, &data);
	*ret_key = strndup(data, (size_t)n);
	assert_non_null(*ret_cert);
	assert_non_null(*ret_key);
	BIO_free(cb);
	BIO_free(kb);
	X509_free(cert);
	EVP_PKEY_free(k);
}

/* A CA file is taken as OpenSSL's loader takes it: PEM certificates
 * (text between them is skipped), and a block that does not parse fails
 * the whole file. */
static void test_crypto_ca_file_check_takes_what_tls_would_load(void **state)
{
	char *cert;
	char *key;
	char text[16384];
	char path[TEST_CA_PATH_MAX];
	char err[128];
	size_t i;
	struct {
		int rc;
		const char *why;
	} want[] = {
	        {0, NULL},
	        {0, NULL},
	        {-1, "it is not a PEM file of certificates"},
	        {-1, "it holds no PEM certificate"},
	        {-1, "it holds no PEM certificate"},
	};

	(void)state;
	test_ca_file_pems(&cert, &key);
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		switch (i) {
		case 0:
			snprintf(text, sizeof(text), "%s", cert);
			break;
		case 1:
			snprintf(text, sizeof(text), "# Private CA\n%s\n# again\n%s", cert, cert);
			break;
		case 2:
			snprintf(text, sizeof(text),
			         "%s-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
			         cert);
			break;
		case 3:
			snprintf(text, sizeof(text), "%s", key);
			break;
		default:
			text[0] = '\0';
			break;
		}
		test_ca_file_write(path, text);
		err[0] = '\0';
		assert_int_equal(crypto_ca_file_check(path, err, sizeof(err)), want[i].rc);
		if (want[i].why != NULL) {
			assert_string_equal(err, want[i].why);
		}
		unlink(path);
	}
	assert_int_equal(crypto_ca_file_check(path, err, sizeof(err)), -1);
	assert_string_equal(err, "cannot open it");
	free(cert);
	free(key);
}

/* RFC 8032 section 7.1, TEST 1 (empty message). */
static void test_crypto_ed25519_verifies_rfc8032_test1(void **state)
{
	unsigned char *pub = NULL;
	unsigned char *sig = NULL;
	size_t n = 0;
	size_t sn = 0;

	(void)state;
	assert_int_equal(crypto_hex_decode(
	                         "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
	                         64, &pub, &n),
	                 0);
	assert_int_equal(crypto_hex_decode(
	                         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
	                         "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
	                         128, &sig, &sn),
	                 0);
	assert_int_equal(crypto_ed25519_verify(pub, "", 0, sig, sn), 1);
	assert_int_equal(crypto_ed25519_verify(pub, "x", 1, sig, sn), 0);
	assert_int_equal(crypto_ed25519_verify(pub, "", 0, sig, sn - 1), 0);
	free(pub);
	free(sig);
}

static void test_crypto_aes256gcm_decrypts_and_refuses_a_bad_tag(void **state)
{
	const unsigned char key[32] = "0123456789abcdef0123456789abcdef";
	const char *iv = "nonce1234567";
	const char *aad = "transaction";
	const char *plain = "{\"out_trade_no\":\"o1\"}";
	unsigned char ct[128];
	unsigned char *out = NULL;
	size_t out_len = 0;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int n = 0;
	int f = 0;

	(void)state;
	assert_int_equal(
	        EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, (const unsigned char *)iv),
	        1);
	assert_int_equal(
	        EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)), 1);
	assert_int_equal(
	        EVP_EncryptUpdate(ctx, ct, &n, (const unsigned char *)plain, (int)strlen(plain)),
	        1);
	assert_int_equal(EVP_EncryptFinal_ex(ctx, ct + n, &f), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, ct + n + f), 1);
	EVP_CIPHER_CTX_free(ctx);

	assert_int_equal(crypto_aes256gcm_decrypt(key, iv, 12, aad, strlen(aad), ct,
	                                          (size_t)(n + f) + 16, &out, &out_len),
	                 0);
	assert_int_equal(out_len, strlen(plain));
	assert_string_equal((char *)out, plain);
	free(out);
	assert_int_equal(crypto_aes256gcm_decrypt(key, iv, 12, "other", 5, ct, (size_t)(n + f) + 16,
	                                          &out, &out_len),
	                 -1);
	ct[0] ^= 1;
	assert_int_equal(crypto_aes256gcm_decrypt(key, iv, 12, aad, strlen(aad), ct,
	                                          (size_t)(n + f) + 16, &out, &out_len),
	                 -1);
	assert_int_equal(
	        crypto_aes256gcm_decrypt(key, iv, 12, aad, strlen(aad), ct, 10, &out, &out_len),
	        -1);
}

static void test_crypto_aes256gcm_encrypt_matches_openssl_and_round_trips(void **state)
{
	const unsigned char key[32] = "0123456789abcdef0123456789abcdef";
	const char *iv = "nonce1234567";
	const char *aad = "transaction";
	const char *plain = "{\"out_trade_no\":\"o1\"}";
	unsigned char want[128];
	unsigned char *ct = NULL;
	unsigned char *back = NULL;
	size_t ct_len = 0;
	size_t back_len = 0;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int n = 0;
	int f = 0;

	(void)state;
	assert_int_equal(
	        EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, (const unsigned char *)iv),
	        1);
	assert_int_equal(
	        EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)), 1);
	assert_int_equal(
	        EVP_EncryptUpdate(ctx, want, &n, (const unsigned char *)plain, (int)strlen(plain)),
	        1);
	assert_int_equal(EVP_EncryptFinal_ex(ctx, want + n, &f), 1);
	assert_int_equal(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, want + n + f), 1);
	EVP_CIPHER_CTX_free(ctx);

	assert_int_equal(crypto_aes256gcm_encrypt(key, iv, 12, aad, strlen(aad), plain, strlen(plain),
	                                          &ct, &ct_len),
	                 0);
	assert_int_equal(ct_len, (size_t)(n + f) + 16);
	assert_memory_equal(ct, want, ct_len);
	assert_int_equal(
	        crypto_aes256gcm_decrypt(key, iv, 12, aad, strlen(aad), ct, ct_len, &back, &back_len),
	        0);
	assert_string_equal((char *)back, plain);
	free(back);
	free(ct);
}

static void test_crypto_generated_rsa_pair_signs_what_its_public_half_verifies(void **state)
{
	const char *data = "1700000000\nnonce\n{\"id\":\"x\"}\n";
	char *priv_pem = NULL;
	char *pub_pem = NULL;
	char *other_priv = NULL;
	char *other_pub = NULL;
	struct crypto_privkey *priv;
	struct crypto_privkey *other;
	struct crypto_pubkey *pub;
	struct crypto_pubkey *pub_der;
	unsigned char *sig = NULL;
	size_t sig_len = 0;
	char der_b64[1024];
	const char *p;
	size_t n = 0;

	(void)state;
	/* 1024 bits keep the test quick under valgrind; simulate makes 2048. */
	assert_int_equal(crypto_rsa_generate(1024, &priv_pem, &pub_pem), 0);
	assert_non_null(strstr(priv_pem, "-----BEGIN PRIVATE KEY-----"));
	assert_non_null(strstr(pub_pem, "-----BEGIN PUBLIC KEY-----"));
	priv = crypto_privkey_load(priv_pem, strlen(priv_pem));
	pub = crypto_pubkey_load(pub_pem, strlen(pub_pem));
	assert_non_null(priv);
	assert_non_null(pub);
	assert_int_equal(crypto_privkey_matches(priv, pub), 1);
	assert_int_equal(crypto_rsa_sha256_sign(priv, data, strlen(data), &sig, &sig_len), 0);
	assert_int_equal(sig_len, 128);
	assert_int_equal(crypto_rsa_sha256_verify(pub, data, strlen(data), sig, sig_len), 1);
	assert_int_equal(crypto_rsa_sha256_verify(pub, data, strlen(data) - 1, sig, sig_len), 0);

	/* The public half as Alipay's console shows a key: one base64 line of DER. */
	p = strchr(pub_pem, '\n') + 1;
	while (*p != '-') {
		if (*p != '\n') {
			der_b64[n++] = *p;
		}
		p++;
	}
	der_b64[n] = '\0';
	pub_der = crypto_pubkey_load(der_b64, n);
	assert_non_null(pub_der);
	assert_int_equal(crypto_rsa_sha256_verify(pub_der, data, strlen(data), sig, sig_len), 1);

	/* Another pair: not this public key's half. */
	assert_int_equal(crypto_rsa_generate(1024, &other_priv, &other_pub), 0);
	other = crypto_privkey_load(other_priv, strlen(other_priv));
	assert_non_null(other);
	assert_int_equal(crypto_privkey_matches(other, pub), 0);
	assert_null(crypto_privkey_load(pub_pem, strlen(pub_pem)));
	crypto_privkey_destroy(NULL);
	crypto_privkey_destroy(other);
	crypto_privkey_destroy(priv);
	crypto_pubkey_destroy(pub);
	crypto_pubkey_destroy(pub_der);
	free(sig);
	free(priv_pem);
	free(pub_pem);
	free(other_priv);
	free(other_pub);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_crypto_hmac_sha256_matches_stripe_published_vectors),
	        cmocka_unit_test(test_crypto_hmac_with_an_empty_key_is_still_keyed),
	        cmocka_unit_test(test_crypto_hmac_sha512_matches_rfc4231),
	        cmocka_unit_test(test_crypto_hmac_spans_equal_the_mac_of_the_whole),
	        cmocka_unit_test(test_crypto_sha256_of_abc_is_the_fips_value),
	        cmocka_unit_test(test_crypto_equal_compares_length_and_content),
	        cmocka_unit_test(test_crypto_hex_decode_accepts_both_cases_and_rejects_junk),
	        cmocka_unit_test(test_crypto_base64_round_trips_every_tail_length),
	        cmocka_unit_test(test_crypto_base64_decode_takes_missing_padding_and_refuses_junk),
	        cmocka_unit_test(test_crypto_uuid4_has_version_and_variant),
	        cmocka_unit_test(
	                test_crypto_rsa_verify_accepts_pem_and_base64_der_and_refuses_changes),
	        cmocka_unit_test(test_crypto_pubkey_load_takes_the_key_from_a_certificate),
	        cmocka_unit_test(test_crypto_ca_file_check_takes_what_tls_would_load),
	        cmocka_unit_test(test_crypto_ed25519_verifies_rfc8032_test1),
	        cmocka_unit_test(test_crypto_aes256gcm_decrypts_and_refuses_a_bad_tag),
	        cmocka_unit_test(test_crypto_aes256gcm_encrypt_matches_openssl_and_round_trips),
	        cmocka_unit_test(
	                test_crypto_generated_rsa_pair_signs_what_its_public_half_verifies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
