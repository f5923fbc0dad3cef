/* cidr.c: addresses and CIDR ranges, IPv4 and IPv6 alike (cidr.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cidr.h"

int cidr_parse_addr(const char *s, unsigned char out[16], int *ret_family)
{
	struct in_addr a4;

	if (inet_pton(AF_INET, s, &a4) == 1) {
		/* IPv4 as an IPv4-mapped IPv6 address, so both families compare alike. */
		memset(out, 0, 10);
		out[10] = 0xff;
		out[11] = 0xff;
		memcpy(out + 12, &a4, 4);
		*ret_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, out) == 1) {
		*ret_family = AF_INET6;
		return 0;
	}
	return -1;
}

int cidr_match(const char *cidr, const char *addr)
{
	unsigned char net[16];
	unsigned char a[16];
	char host[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(cidr, '/');
	size_t hlen = slash != NULL ? (size_t)(slash - cidr) : strlen(cidr);
	int fam_net;
	int fam_a;
	long bits;
	long i;

	if (hlen == 0 || hlen >= sizeof(host)) {
		return -1;
	}
	memcpy(host, cidr, hlen);
	host[hlen] = '\0';
	if (cidr_parse_addr(host, net, &fam_net) < 0 || cidr_parse_addr(addr, a, &fam_a) < 0) {
		return -1;
	}
	if (slash != NULL) {
		char *end;

		errno = 0;
		bits = strtol(slash + 1, &end, 10);
		if (errno != 0 || *end != '\0' || end == slash + 1 || bits < 0 ||
		    bits > (fam_net == AF_INET ? 32 : 128)) {
			return -1;
		}
	} else {
		bits = fam_net == AF_INET ? 32 : 128;
	}
	if (fam_net == AF_INET) {
		bits += 96;
	}
	for (i = 0; i < bits; i++) {
		int m = 0x80 >> (i % 8);

		if ((net[i / 8] & m) != (a[i / 8] & m)) {
			return 0;
		}
	}
	return 1;
}
