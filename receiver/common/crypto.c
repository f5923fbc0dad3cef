/* crypto.c: hashes, MACs, signatures, AES-GCM and encodings over OpenSSL 3 libcrypto. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "crypto.h"
#include "log.h"
#include "text.h"

struct crypto_pubkey {
	EVP_PKEY *ck_pkey;
};

struct crypto_privkey {
	EVP_PKEY *cp_pkey;
};

/* Logs the OpenSSL error queue's first entry once, then clears the queue. */
static void crypto_log_openssl(const char *what)
{
	char msg[256];
	unsigned long e = ERR_get_error();

	if (e == 0) {
		log_err("crypto: %s failed", what);
	} else {
		ERR_error_string_n(e, msg, sizeof(msg));
		log_err("crypto: %s failed: %s", what, msg);
	}
	ERR_clear_error();
}

/* Fetched and set up once: a fetch per call costs more than the MAC itself
 * and takes locks every thread contends on. Each thread duplicates the
 * template of a digest once and keys its copy again for every MAC (a
 * duplicate and a free per call cost more than the MAC of a short body), so
 * nothing is shared mutably between threads. */
static pthread_once_t crypto_fetch_once = PTHREAD_ONCE_INIT;
static EVP_MAC_CTX *crypto_hmac_sha256;
static EVP_MAC_CTX *crypto_hmac_sha512;
static EVP_MD *crypto_md_sha256;
static pthread_key_t crypto_tls_key;
static int crypto_tls_made;

/* A thread's own HMAC contexts, one per digest, and its SHA-256 context,
 * each made on first use. */
struct crypto_tls {
	EVP_MAC_CTX *ct_hmac[2];
	EVP_MD_CTX *ct_sha256;
};

static void crypto_tls_free(void *arg)
{
	struct crypto_tls *ct = arg;

	EVP_MAC_CTX_free(ct->ct_hmac[0]);
	EVP_MAC_CTX_free(ct->ct_hmac[1]);
	EVP_MD_CTX_free(ct->ct_sha256);
	free(ct);
}

/* This thread's crypto_tls, made on first use; NULL when it cannot be. */
static struct crypto_tls *crypto_tls_get(void)
{
	struct crypto_tls *ct;

	if (!crypto_tls_made) {
		return NULL;
	}
	ct = pthread_getspecific(crypto_tls_key);
	if (ct == NULL) {
		ct = calloc(1, sizeof(*ct));
		if (ct != NULL && pthread_setspecific(crypto_tls_key, ct) != 0) {
			free(ct);
			ct = NULL;
		}
	}
	return ct;
}

static EVP_MAC_CTX *crypto_hmac_template(EVP_MAC *mac, const char *digest)
{
	char name[8];
	OSSL_PARAM params[2];
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);

	memcpy(name, digest, strlen(digest) + 1);
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, name, 0);
	params[1] = OSSL_PARAM_construct_end();
	if (ctx != NULL && EVP_MAC_CTX_set_params(ctx, params) != 1) {
		EVP_MAC_CTX_free(ctx);
		ctx = NULL;
	}
	return ctx;
}

static void crypto_fetch(void)
{
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);

	crypto_md_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	crypto_tls_made = pthread_key_create(&crypto_tls_key, crypto_tls_free) == 0;
	if (mac == NULL) {
		return;
	}
	crypto_hmac_sha256 = crypto_hmac_template(mac, "SHA256");
	crypto_hmac_sha512 = crypto_hmac_template(mac, "SHA512");
	/* The contexts hold their own references. */
	EVP_MAC_free(mac);
}

void crypto_sha256(const void *data, size_t len, unsigned char out[CRYPTO_SHA256_LEN])
{
	struct crypto_tls *ct;
	EVP_MD_CTX *ctx;
	unsigned int n = 0;

	pthread_once(&crypto_fetch_once, crypto_fetch);
	ct = crypto_tls_get();
	if (ct != NULL && ct->ct_sha256 == NULL) {
		ct->ct_sha256 = EVP_MD_CTX_new();
	}
	ctx = ct != NULL ? ct->ct_sha256 : NULL;
	/* A digest cannot fail for SHA-256 short of memory exhaustion; zero the
	 * output so a failure can never look like a real digest of something.
	 * The thread's context is initialised again for every digest. */
	if (crypto_md_sha256 == NULL ||
	    (ctx != NULL ? EVP_DigestInit_ex(ctx, crypto_md_sha256, NULL) != 1 ||
	                           EVP_DigestUpdate(ctx, data, len) != 1 ||
	                           EVP_DigestFinal_ex(ctx, out, &n) != 1
	                 : EVP_Digest(data, len, out, &n, crypto_md_sha256, NULL) != 1)) {
		crypto_log_openssl("SHA-256");
		memset(out, 0, CRYPTO_SHA256_LEN);
	}
}

/* This thread's HMAC context of the template's digest (slot 0 or 1), or a
 * new one the caller frees (*ret_own set) when the thread cannot keep one. */
static EVP_MAC_CTX *crypto_hmac_ctx(const EVP_MAC_CTX *template, int slot, int *ret_own)
{
	struct crypto_tls *ct = crypto_tls_get();

	*ret_own = 0;
	if (ct == NULL) {
		*ret_own = 1;
		return EVP_MAC_CTX_dup(template);
	}
	if (ct->ct_hmac[slot] == NULL) {
		ct->ct_hmac[slot] = EVP_MAC_CTX_dup(template);
	}
	return ct->ct_hmac[slot];
}

/* After a failure a thread's context may be half-way: dropped, so the next
 * call starts from the template again. */
static void crypto_hmac_ctx_drop(EVP_MAC_CTX *ctx, int slot, int own)
{
	struct crypto_tls *ct;

	if (!own && crypto_tls_made && (ct = pthread_getspecific(crypto_tls_key)) != NULL &&
	    ct->ct_hmac[slot] == ctx) {
		ct->ct_hmac[slot] = NULL;
	}
	EVP_MAC_CTX_free(ctx);
}

int crypto_hmac_spans(enum crypto_hash hash, const void *key, size_t key_len,
                      const struct crypto_span *spans, size_t n_spans, unsigned char *out,
                      size_t *ret_len)
{
	static const unsigned char empty[1];
	const EVP_MAC_CTX *template;
	EVP_MAC_CTX *ctx;
	int slot = hash == CRYPTO_SHA512 ? 1 : 0;
	size_t n = 0;
	size_t i;
	int own;

	pthread_once(&crypto_fetch_once, crypto_fetch);
	template = slot == 1 ? crypto_hmac_sha512 : crypto_hmac_sha256;
	if (template == NULL) {
		crypto_log_openssl("setting up HMAC");
		return -1;
	}
	/* An empty key must still be a key, not "reuse the previous one":
	 * EVP_MAC_init keys the context again whenever key is not NULL. */
	if (key == NULL || key_len == 0) {
		key = empty;
		key_len = 0;
	}
	ctx = crypto_hmac_ctx(template, slot, &own);
	if (ctx == NULL || EVP_MAC_init(ctx, key, key_len, NULL) != 1) {
		goto fail;
	}
	for (i = 0; i < n_spans; i++) {
		if (spans[i].cs_len > 0 &&
		    EVP_MAC_update(ctx, spans[i].cs_data, spans[i].cs_len) != 1) {
			goto fail;
		}
	}
	if (EVP_MAC_final(ctx, out, &n, CRYPTO_HMAC_MAX) != 1) {
		goto fail;
	}
	*ret_len = n;
	if (own) {
		EVP_MAC_CTX_free(ctx);
	}
	return 0;
fail:
	crypto_log_openssl("HMAC");
	if (ctx != NULL) {
		crypto_hmac_ctx_drop(ctx, slot, own);
	}
	return -1;
}

int crypto_hmac(enum crypto_hash hash, const void *key, size_t key_len, const void *data,
                size_t len, unsigned char *out, size_t *ret_len)
{
	struct crypto_span span = {.cs_data = data, .cs_len = data != NULL ? len : 0};

	return crypto_hmac_spans(hash, key, key_len, &span, 1, out, ret_len);
}

int crypto_equal(const void *a, size_t a_len, const void *b, size_t b_len)
{
	if (a_len != b_len) {
		return 0;
	}
	if (a_len == 0) {
		return 1;
	}
	return CRYPTO_memcmp(a, b, a_len) == 0;
}

void crypto_hex_encode(const unsigned char *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 0x0f];
	}
	out[2 * len] = '\0';
}

int crypto_hex_decode(const char *hex, size_t hex_len, unsigned char **ret, size_t *ret_len)
{
	unsigned char *out;
	size_t i;

	if (hex_len % 2 != 0) {
		return -1;
	}
	out = malloc(hex_len / 2 + 1);
	if (out == NULL) {
		return -1;
	}
	for (i = 0; i < hex_len / 2; i++) {
		int hi = text_hex_value(hex[2 * i]);
		int lo = text_hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			goto fail;
		}
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	out[hex_len / 2] = 0;
	*ret = out;
	*ret_len = hex_len / 2;
	return 0;
fail:
	free(out);
	return -1;
}

static const char crypto_b64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int crypto_base64_encode(const void *in, size_t len, char **ret, size_t *ret_len)
{
	const unsigned char *p = in;
	size_t out_len;
	size_t i;
	size_t o = 0;
	char *out;

	if (len > (SIZE_MAX / 4) * 3 - 3) {
		return -1;
	}
	out_len = (len + 2) / 3 * 4;
	out = malloc(out_len + 1);
	if (out == NULL) {
		return -1;
	}
	for (i = 0; i + 2 < len; i += 3) {
		unsigned long v =
		        (unsigned long)p[i] << 16 | (unsigned long)p[i + 1] << 8 | p[i + 2];

		out[o++] = crypto_b64_alphabet[(v >> 18) & 63];
		out[o++] = crypto_b64_alphabet[(v >> 12) & 63];
		out[o++] = crypto_b64_alphabet[(v >> 6) & 63];
		out[o++] = crypto_b64_alphabet[v & 63];
	}
	if (len - i == 1) {
		unsigned long v = (unsigned long)p[i] << 16;

		out[o++] = crypto_b64_alphabet[(v >> 18) & 63];
		out[o++] = crypto_b64_alphabet[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (len - i == 2) {
		unsigned long v = (unsigned long)p[i] << 16 | (unsigned long)p[i + 1] << 8;

		out[o++] = crypto_b64_alphabet[(v >> 18) & 63];
		out[o++] = crypto_b64_alphabet[(v >> 12) & 63];
		out[o++] = crypto_b64_alphabet[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
	*ret = out;
	if (ret_len != NULL) {
		*ret_len = o;
	}
	return 0;
}

static int crypto_b64_value(char c)
{
	if (c >= 'A' && c <= 'Z') {
		return c - 'A';
	}
	if (c >= 'a' && c <= 'z') {
		return c - 'a' + 26;
	}
	if (c >= '0' && c <= '9') {
		return c - '0' + 52;
	}
	if (c == '+') {
		return 62;
	}
	if (c == '/') {
		return 63;
	}
	return -1;
}

int crypto_base64_decode(const char *in, size_t len, unsigned char **ret, size_t *ret_len)
{
	unsigned char *out;
	unsigned long acc = 0;
	size_t bits = 0;
	size_t o = 0;
	size_t i;

	/* Padding is optional but, when present, must complete the last quantum. */
	if (len > 0 && in[len - 1] == '=') {
		if (len % 4 != 0) {
			return -1;
		}
		len--;
		if (len > 0 && in[len - 1] == '=') {
			len--;
		}
	}
	if (len % 4 == 1) {
		return -1;
	}
	out = malloc(len / 4 * 3 + 3);
	if (out == NULL) {
		return -1;
	}
	for (i = 0; i < len; i++) {
		int v = crypto_b64_value(in[i]);

		if (v < 0) {
			goto fail;
		}
		acc = (acc << 6 | (unsigned long)v) & 0xffffff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	/* Leftover bits must be zero (canonical encoding). */
	if ((acc & ((1UL << bits) - 1)) != 0) {
		goto fail;
	}
	out[o] = 0;
	*ret = out;
	*ret_len = o;
	return 0;
fail:
	free(out);
	return -1;
}

int crypto_random(void *buf, size_t len)
{
	if (len > INT32_MAX) {
		return -1;
	}
	if (RAND_bytes(buf, (int)len) != 1) {
		crypto_log_openssl("RAND_bytes");
		return -1;
	}
	return 0;
}

int crypto_uuid4(char out[37])
{
	unsigned char b[16];
	char hex[33];
	size_t i;
	size_t o = 0;

	if (crypto_random(b, sizeof(b)) != 0) {
		return -1;
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	crypto_hex_encode(b, sizeof(b), hex);
	for (i = 0; i < 32; i++) {
		if (i == 8 || i == 12 || i == 16 || i == 20) {
			out[o++] = '-';
		}
		out[o++] = hex[i];
	}
	out[o] = '\0';
	return 0;
}

static EVP_PKEY *crypto_pubkey_from_pem(const char *text, size_t len)
{
	EVP_PKEY *pkey = NULL;
	X509 *cert = NULL;
	BIO *bio;

	if (len > INT32_MAX) {
		return NULL;
	}
	bio = BIO_new_mem_buf(text, (int)len);
	if (bio == NULL) {
		return NULL;
	}
	if (strstr(text, "-----BEGIN CERTIFICATE-----") != NULL) {
		cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
		if (cert != NULL) {
			pkey = X509_get_pubkey(cert);
		}
	} else {
		pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	}
	X509_free(cert);
	BIO_free(bio);
	return pkey;
}

static EVP_PKEY *crypto_pubkey_from_der_b64(const char *text, size_t len)
{
	unsigned char *der = NULL;
	const unsigned char *p;
	size_t der_len = 0;
	EVP_PKEY *pkey = NULL;
	char *compact;
	size_t n = 0;
	size_t i;

	/* Alipay's console shows the key as one base64 line; tolerate line breaks. */
	compact = malloc(len + 1);
	if (compact == NULL) {
		return NULL;
	}
	for (i = 0; i < len; i++) {
		if (text[i] != '\n' && text[i] != '\r' && text[i] != ' ' && text[i] != '\t') {
			compact[n++] = text[i];
		}
	}
	compact[n] = '\0';
	if (crypto_base64_decode(compact, n, &der, &der_len) != 0 || der_len > INT32_MAX) {
		goto done;
	}
	p = der;
	pkey = d2i_PUBKEY(NULL, &p, (long)der_len);
done:
	free(der);
	free(compact);
	return pkey;
}

int crypto_ca_file_check(const char *path, char *err, size_t err_size)
{
	STACK_OF(X509_INFO) *infos = NULL;
	BIO *b = BIO_new_file(path, "r");
	int certs = 0;
	int rc = -1;
	int i;

	if (b == NULL) {
		snprintf(err, err_size, "cannot open it");
		goto done;
	}
	/* What OpenSSL's X509_load_cert_crl_file reads: a block it cannot
	 * parse fails the whole file. */
	infos = PEM_X509_INFO_read_bio(b, NULL, NULL, NULL);
	if (infos == NULL) {
		snprintf(err, err_size, "it is not a PEM file of certificates");
		goto done;
	}
	for (i = 0; i < sk_X509_INFO_num(infos); i++) {
		if (sk_X509_INFO_value(infos, i)->x509 != NULL) {
			certs++;
		}
	}
	if (certs == 0) {
		snprintf(err, err_size, "it holds no PEM certificate");
		goto done;
	}
	rc = 0;
done:
	ERR_clear_error();
	sk_X509_INFO_pop_free(infos, X509_INFO_free);
	BIO_free(b);
	return rc;
}

int crypto_tls_pair_check(const char *cert_pem, const char *key_pem)
{
	BIO *cb = BIO_new_mem_buf(cert_pem, -1);
	BIO *kb = BIO_new_mem_buf(key_pem, -1);
	X509 *cert = NULL;
	EVP_PKEY *key = NULL;
	int rc = -1;

	if (cb == NULL || kb == NULL) {
		goto done;
	}
	cert = PEM_read_bio_X509(cb, NULL, NULL, NULL);
	if (cert == NULL) {
		log_err("TLS: the certificate is not a PEM X.509 certificate");
		goto done;
	}
	key = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL);
	if (key == NULL) {
		log_err("TLS: the key is not an unencrypted PEM private key");
		goto done;
	}
	if (X509_check_private_key(cert, key) != 1) {
		log_err("TLS: the private key does not belong to the certificate");
		goto done;
	}
	rc = 0;
done:
	ERR_clear_error();
	X509_free(cert);
	EVP_PKEY_free(key);
	BIO_free(cb);
	BIO_free(kb);
	return rc;
}

struct crypto_pubkey *crypto_pubkey_load(const char *text, size_t len)
{
	struct crypto_pubkey *key = NULL;
	EVP_PKEY *pkey = NULL;
	char *copy;

	/* Work on a NUL-terminated copy so strstr cannot run past len. */
	copy = malloc(len + 1);
	if (copy == NULL) {
		return NULL;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	if (strstr(copy, "-----BEGIN") != NULL) {
		pkey = crypto_pubkey_from_pem(copy, len);
	} else {
		pkey = crypto_pubkey_from_der_b64(copy, len);
	}
	free(copy);
	if (pkey == NULL) {
		crypto_log_openssl("loading a public key");
		goto fail;
	}
	key = malloc(sizeof(*key));
	if (key == NULL) {
		goto fail;
	}
	key->ck_pkey = pkey;
	return key;
fail:
	EVP_PKEY_free(pkey);
	return NULL;
}

int crypto_pubkey_pin(const struct crypto_pubkey *key, char **ret)
{
	static const char prefix[] = "sha256//";
	unsigned char digest[CRYPTO_SHA256_LEN];
	unsigned char *der = NULL;
	char *b64 = NULL;
	size_t b64_len;
	char *pin;
	int n;

	n = i2d_PUBKEY(key->ck_pkey, &der);
	if (n <= 0) {
		crypto_log_openssl("encoding a public key");
		return -1;
	}
	crypto_sha256(der, (size_t)n, digest);
	OPENSSL_free(der);
	if (crypto_base64_encode(digest, sizeof(digest), &b64, &b64_len) < 0) {
		return -1;
	}
	pin = malloc(sizeof(prefix) + b64_len);
	if (pin == NULL) {
		free(b64);
		return -1;
	}
	memcpy(pin, prefix, sizeof(prefix) - 1);
	memcpy(pin + sizeof(prefix) - 1, b64, b64_len + 1);
	free(b64);
	*ret = pin;
	return 0;
}

void crypto_pubkey_destroy(struct crypto_pubkey *key)
{
	if (key == NULL) {
		return;
	}
	EVP_PKEY_free(key->ck_pkey);
	free(key);
}

/* One-shot verification with an initialized key; 1 valid, 0 invalid, -1 error. */
static int crypto_verify(EVP_PKEY *pkey, const EVP_MD *md, const void *data, size_t len,
                         const unsigned char *sig, size_t sig_len)
{
	EVP_MD_CTX *ctx;
	int rc = -1;
	int v;

	ctx = EVP_MD_CTX_new();
	if (ctx == NULL) {
		return -1;
	}
	if (EVP_DigestVerifyInit(ctx, NULL, md, NULL, pkey) != 1) {
		crypto_log_openssl("EVP_DigestVerifyInit");
		goto done;
	}
	v = EVP_DigestVerify(ctx, sig, sig_len, data, len);
	/* A bad signature is an answer, not an error worth a log line. */
	rc = v == 1 ? 1 : 0;
	ERR_clear_error();
done:
	EVP_MD_CTX_free(ctx);
	return rc;
}

int crypto_rsa_sha256_verify(const struct crypto_pubkey *key, const void *data, size_t len,
                             const unsigned char *sig, size_t sig_len)
{
	if (key == NULL || !EVP_PKEY_is_a(key->ck_pkey, "RSA")) {
		return -1;
	}
	return crypto_verify(key->ck_pkey, EVP_sha256(), data, len, sig, sig_len);
}

int crypto_ed25519_verify(const unsigned char pub[32], const void *data, size_t len,
                          const unsigned char *sig, size_t sig_len)
{
	EVP_PKEY *pkey;
	int rc;

	pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
	if (pkey == NULL) {
		crypto_log_openssl("loading an Ed25519 key");
		return -1;
	}
	if (sig_len != 64) {
		EVP_PKEY_free(pkey);
		return 0;
	}
	rc = crypto_verify(pkey, NULL, data, len, sig, sig_len);
	EVP_PKEY_free(pkey);
	return rc;
}

int crypto_aes256gcm_decrypt(const unsigned char key[32], const void *iv, size_t iv_len,
                             const void *aad, size_t aad_len, const unsigned char *in,
                             size_t in_len, unsigned char **ret, size_t *ret_len)
{
	EVP_CIPHER_CTX *ctx = NULL;
	unsigned char *out = NULL;
	size_t ct_len;
	int n = 0;
	int fin = 0;

	if (in_len < 16 || in_len > INT32_MAX || iv_len == 0 || iv_len > INT32_MAX ||
	    aad_len > INT32_MAX) {
		return -1;
	}
	ct_len = in_len - 16;
	out = malloc(ct_len + 1);
	ctx = EVP_CIPHER_CTX_new();
	if (out == NULL || ctx == NULL) {
		goto fail;
	}
	if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, (int)iv_len, NULL) != 1 ||
	    EVP_DecryptInit_ex(ctx, NULL, NULL, key, iv) != 1) {
		crypto_log_openssl("AES-256-GCM init");
		goto fail;
	}
	if (aad_len > 0 && EVP_DecryptUpdate(ctx, NULL, &n, aad, (int)aad_len) != 1) {
		crypto_log_openssl("AES-256-GCM AAD");
		goto fail;
	}
	n = 0;
	if (ct_len > 0 && EVP_DecryptUpdate(ctx, out, &n, in, (int)ct_len) != 1) {
		crypto_log_openssl("AES-256-GCM decrypt");
		goto fail;
	}
	if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, (void *)(in + ct_len)) != 1) {
		crypto_log_openssl("AES-256-GCM tag");
		goto fail;
	}
	/* A tag mismatch is the sender's problem (or an attack), not ours to log. */
	if (EVP_DecryptFinal_ex(ctx, out + n, &fin) != 1) {
		ERR_clear_error();
		goto fail;
	}
	EVP_CIPHER_CTX_free(ctx);
	out[n + fin] = '\0';
	*ret = out;
	*ret_len = (size_t)(n + fin);
	return 0;
fail:
	EVP_CIPHER_CTX_free(ctx);
	free(out);
	return -1;
}

/* pkey as PEM text (its private key when private_key), malloc'd; NULL on failure. */
static char *crypto_pem_text(EVP_PKEY *pkey, int private_key)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *data = NULL;
	char *out = NULL;
	long n;
	int ok;

	if (bio == NULL) {
		return NULL;
	}
	ok = private_key ? PEM_write_bio_PrivateKey(bio, pkey, NULL, NULL, 0, NULL, NULL)
	                 : PEM_write_bio_PUBKEY(bio, pkey);
	n = BIO_get_mem_data(bio, &data);
	if (ok == 1 && n > 0) {
		out = malloc((size_t)n + 1);
		if (out != NULL) {
			memcpy(out, data, (size_t)n);
			out[n] = '\0';
		}
	}
	if (private_key && data != NULL && n > 0) {
		OPENSSL_cleanse(data, (size_t)n);
	}
	BIO_free(bio);
	return out;
}

int crypto_rsa_generate(unsigned bits, char **ret_private_pem, char **ret_public_pem)
{
	EVP_PKEY *pkey = EVP_RSA_gen(bits);
	char *priv = NULL;
	char *pub = NULL;

	if (pkey == NULL) {
		crypto_log_openssl("generating an RSA key");
		return -1;
	}
	priv = crypto_pem_text(pkey, 1);
	pub = crypto_pem_text(pkey, 0);
	EVP_PKEY_free(pkey);
	if (priv == NULL || pub == NULL) {
		crypto_log_openssl("writing an RSA key as PEM");
		if (priv != NULL) {
			OPENSSL_cleanse(priv, strlen(priv));
		}
		free(priv);
		free(pub);
		return -1;
	}
	*ret_private_pem = priv;
	*ret_public_pem = pub;
	return 0;
}

/* 1 when text holds a PEM "-----BEGIN" line. */
static int crypto_has_pem_header(const char *text, size_t len)
{
	static const char begin[] = "-----BEGIN";
	size_t i;

	for (i = 0; i + sizeof(begin) - 1 <= len; i++) {
		if (memcmp(text + i, begin, sizeof(begin) - 1) == 0) {
			return 1;
		}
	}
	return 0;
}

/* The base64 of a DER private key, PKCS#8 or PKCS#1 RSA, as Alipay's key
 * tool writes it: one line, surrounding whitespace ignored. */
static EVP_PKEY *crypto_privkey_from_der_b64(const char *text, size_t len)
{
	unsigned char *der = NULL;
	const unsigned char *p;
	size_t der_len = 0;
	EVP_PKEY *pkey;

	while (len > 0 &&
	       (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ')) {
		len--;
	}
	while (len > 0 && (text[0] == ' ' || text[0] == '\n' || text[0] == '\r')) {
		text++;
		len--;
	}
	if (crypto_base64_decode(text, len, &der, &der_len) < 0 || der_len > INT32_MAX) {
		free(der);
		return NULL;
	}
	p = der;
	pkey = d2i_AutoPrivateKey(NULL, &p, (long)der_len);
	explicit_bzero(der, der_len);
	free(der);
	return pkey;
}

struct crypto_privkey *crypto_privkey_load(const char *pem, size_t len)
{
	struct crypto_privkey *key;
	EVP_PKEY *pkey;
	BIO *bio;

	if (len > INT32_MAX) {
		return NULL;
	}
	if (crypto_has_pem_header(pem, len)) {
		bio = BIO_new_mem_buf(pem, (int)len);
		if (bio == NULL) {
			return NULL;
		}
		pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
		BIO_free(bio);
	} else {
		pkey = crypto_privkey_from_der_b64(pem, len);
	}
	if (pkey == NULL) {
		/* OpenSSL's message names no key material. */
		crypto_log_openssl("loading a private key");
		return NULL;
	}
	key = malloc(sizeof(*key));
	if (key == NULL) {
		EVP_PKEY_free(pkey);
		return NULL;
	}
	key->cp_pkey = pkey;
	return key;
}

void crypto_privkey_destroy(struct crypto_privkey *key)
{
	if (key == NULL) {
		return;
	}
	EVP_PKEY_free(key->cp_pkey);
	free(key);
}

int crypto_privkey_matches(const struct crypto_privkey *key, const struct crypto_pubkey *pub)
{
	int rc;

	if (key == NULL || pub == NULL) {
		return 0;
	}
	rc = EVP_PKEY_eq(key->cp_pkey, pub->ck_pkey) == 1;
	ERR_clear_error();
	return rc;
}

int crypto_rsa_sha256_sign(const struct crypto_privkey *key, const void *data, size_t len,
                           unsigned char **ret, size_t *ret_len)
{
	EVP_MD_CTX *ctx = NULL;
	unsigned char *sig = NULL;
	size_t n = 0;

	if (key == NULL || !EVP_PKEY_is_a(key->cp_pkey, "RSA")) {
		return -1;
	}
	ctx = EVP_MD_CTX_new();
	if (ctx == NULL) {
		return -1;
	}
	if (EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key->cp_pkey) != 1 ||
	    EVP_DigestSign(ctx, NULL, &n, data, len) != 1) {
		crypto_log_openssl("SHA256withRSA sign");
		goto fail;
	}
	sig = malloc(n);
	if (sig == NULL) {
		goto fail;
	}
	if (EVP_DigestSign(ctx, sig, &n, data, len) != 1) {
		crypto_log_openssl("SHA256withRSA sign");
		goto fail;
	}
	EVP_MD_CTX_free(ctx);
	*ret = sig;
	*ret_len = n;
	return 0;
fail:
	EVP_MD_CTX_free(ctx);
	free(sig);
	return -1;
}

int crypto_aes256gcm_encrypt(const unsigned char key[32], const void *iv, size_t iv_len,
                             const void *aad, size_t aad_len, const void *in, size_t in_len,
                             unsigned char **ret, size_t *ret_len)
{
	EVP_CIPHER_CTX *ctx = NULL;
	unsigned char *out = NULL;
	int n = 0;
	int fin = 0;

	if (in_len > INT32_MAX - 32 || iv_len == 0 || iv_len > INT32_MAX || aad_len > INT32_MAX) {
		return -1;
	}
	out = malloc(in_len + 16);
	ctx = EVP_CIPHER_CTX_new();
	if (out == NULL || ctx == NULL) {
		goto fail;
	}
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, (int)iv_len, NULL) != 1 ||
	    EVP_EncryptInit_ex(ctx, NULL, NULL, key, iv) != 1 ||
	    (aad_len > 0 && EVP_EncryptUpdate(ctx, NULL, &n, aad, (int)aad_len) != 1)) {
		crypto_log_openssl("AES-256-GCM encrypt init");
		goto fail;
	}
	n = 0;
	if ((in_len > 0 && EVP_EncryptUpdate(ctx, out, &n, in, (int)in_len) != 1) ||
	    EVP_EncryptFinal_ex(ctx, out + n, &fin) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, out + n + fin) != 1) {
		crypto_log_openssl("AES-256-GCM encrypt");
		goto fail;
	}
	EVP_CIPHER_CTX_free(ctx);
	*ret = out;
	*ret_len = (size_t)(n + fin) + 16;
	return 0;
fail:
	EVP_CIPHER_CTX_free(ctx);
	free(out);
	return -1;
}
