/* cidr.h: addresses and CIDR ranges, IPv4 and IPv6 alike: what the
 * listener's trusted proxies and a provider's allow_from are made of. */
#ifndef IDEMHOOK_CIDR_H
#define IDEMHOOK_CIDR_H

/* Parses a numeric IPv4 or IPv6 address into out, IPv4 as an IPv4-mapped
 * IPv6 address, with its family (AF_INET, AF_INET6). Returns 0 or -1. */
int cidr_parse_addr(const char *s, unsigned char out[16], int *ret_family);

/* 1 if addr (text) lies in the CIDR (e.g. "10.0.0.0/8", "::1/128"); 0 if
 * not; -1 if either is malformed. */
int cidr_match(const char *cidr, const char *addr);

#endif
