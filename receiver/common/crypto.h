/* crypto.h: the OpenSSL primitives idemhook needs; only crypto.c includes OpenSSL. */
#ifndef IDEMHOOK_CRYPTO_H
#define IDEMHOOK_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define CRYPTO_SHA256_LEN 32
#define CRYPTO_HMAC_MAX 64 /* SHA-512 */

enum crypto_hash {
	CRYPTO_SHA256 = 0,
	CRYPTO_SHA512,
};

void crypto_sha256(const void *data, size_t len, unsigned char out[CRYPTO_SHA256_LEN]);

/* HMAC over data; writes the MAC to out (CRYPTO_HMAC_MAX bytes room) and its
 * length to ret_len. Returns 0 or -1. */
int crypto_hmac(enum crypto_hash hash, const void *key, size_t key_len, const void *data, size_t len,
		unsigned char *out, size_t *ret_len);

/* A piece of the text a MAC covers. */
struct crypto_span {
	const void *cs_data;
	size_t cs_len;
};

/* HMAC over the concatenation of n_spans spans, without copying them
 * together; otherwise as crypto_hmac. */
int crypto_hmac_spans(enum crypto_hash hash, const void *key, size_t key_len, const struct crypto_span *spans,
		      size_t n_spans, unsigned char *out, size_t *ret_len);

/* Constant-time comparison of two equal-length buffers: 1 equal, 0 not.
 * Different lengths compare unequal (length is not secret). */
int crypto_equal(const void *a, size_t a_len, const void *b, size_t b_len);

/* Lower-case hex of len bytes into out (2*len+1 bytes). */
void crypto_hex_encode(const unsigned char *in, size_t len, char *out);
/* Decodes hex (either case); malloc'd result. Returns 0 or -1 (malformed). */
int crypto_hex_decode(const char *hex, size_t hex_len, unsigned char **ret, size_t *ret_len);

/* Standard base64 with padding; malloc'd, NUL-terminated. Returns 0 or -1. */
int crypto_base64_encode(const void *in, size_t len, char **ret, size_t *ret_len);
/* Decodes standard base64 (padding optional, no whitespace). Returns 0 or -1. */
int crypto_base64_decode(const char *in, size_t len, unsigned char **ret, size_t *ret_len);

/* Fills buf from the CSPRNG. Returns 0 or -1. */
int crypto_random(void *buf, size_t len);
/* A random UUID v4, "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx". Returns 0 or -1. */
int crypto_uuid4(char out[37]);

/* Public keys for signature checks. */
struct crypto_pubkey;

/* Loads a PEM public key, PEM X.509 certificate, or base64 DER
 * SubjectPublicKeyInfo (Alipay's format). NULL on failure (logged). */
struct crypto_pubkey *crypto_pubkey_load(const char *text, size_t len);
void crypto_pubkey_destroy(struct crypto_pubkey *key);

/* The key's pin as the HTTP client takes it (httpc_request hcq_pinned_key):
 * "sha256//" and the base64 of the SHA-256 of its DER SubjectPublicKeyInfo.
 * Returns 0 with *ret malloc'd, or -1 (logged). */
int crypto_pubkey_pin(const struct crypto_pubkey *key, char **ret);

/* Checks that cert_pem holds a PEM X.509 certificate and key_pem a PEM
 * private key that belongs to it. Returns 0, or -1 with the reason logged
 * (never the key). */
int crypto_tls_pair_check(const char *cert_pem, const char *key_pem);

/* Checks the file at path as the HTTP client's TLS library loads a CA file
 * (PEM, every block readable, at least one certificate). Returns 0, or -1
 * with one sentence in err (no log): the caller names the key. */
int crypto_ca_file_check(const char *path, char *err, size_t err_size);

/* SHA256withRSA PKCS#1 v1.5: 1 valid, 0 invalid, -1 error. */
int crypto_rsa_sha256_verify(const struct crypto_pubkey *key, const void *data, size_t len, const unsigned char *sig,
			     size_t sig_len);

/* Ed25519 with a raw 32-byte public key: 1 valid, 0 invalid, -1 error. */
int crypto_ed25519_verify(const unsigned char pub[32], const void *data, size_t len, const unsigned char *sig,
			  size_t sig_len);

/* Private keys, for idemhook simulate's throwaway key pair. */
struct crypto_privkey;

/* A new RSA key pair of bits bits: the private key as unencrypted PKCS#8 PEM
 * and the public key as PEM SubjectPublicKeyInfo, both malloc'd. Returns 0,
 * or -1 (logged). */
int crypto_rsa_generate(unsigned bits, char **ret_private_pem, char **ret_public_pem);

/* Loads an unencrypted private key: PEM, or the base64 of its DER (PKCS#8
 * or PKCS#1 RSA, Alipay's key tool's one line). NULL on failure (logged,
 * never the key). */
struct crypto_privkey *crypto_privkey_load(const char *pem, size_t len);
void crypto_privkey_destroy(struct crypto_privkey *key);

/* 1 when pub is the public half of key, else 0. */
int crypto_privkey_matches(const struct crypto_privkey *key, const struct crypto_pubkey *pub);

/* SHA256withRSA PKCS#1 v1.5 signature, malloc'd. Returns 0 or -1 (logged). */
int crypto_rsa_sha256_sign(const struct crypto_privkey *key, const void *data, size_t len,
			   unsigned char **ret, size_t *ret_len);

/* AES-256-GCM encrypt; ret = ciphertext || 16-byte tag, malloc'd. Returns 0,
 * or -1 (logged). */
int crypto_aes256gcm_encrypt(const unsigned char key[32], const void *iv, size_t iv_len, const void *aad,
			     size_t aad_len, const void *in, size_t in_len, unsigned char **ret,
			     size_t *ret_len);

/* AES-256-GCM decrypt; in = ciphertext || 16-byte tag. malloc'd plaintext,
 * NUL-terminated. Returns 0, or -1 (bad tag or error). */
int crypto_aes256gcm_decrypt(const unsigned char key[32], const void *iv, size_t iv_len, const void *aad,
			     size_t aad_len, const unsigned char *in, size_t in_len, unsigned char **ret,
			     size_t *ret_len);

#endif
