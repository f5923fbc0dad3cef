/* http_ceiling.c: the HTTP ceiling of the benchmark: libmicrohttpd with the
 * daemon's threading (a pool of one thread per core, internal polling),
 * reading each request body and answering 200 with no work. Listens on
 * 127.0.0.1 on an ephemeral port, prints the port, serves until stdin
 * closes. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

static const char ceiling_body[] = "{\"received\":true}";

static enum MHD_Result ceiling_access(void *cls, struct MHD_Connection *con, const char *url,
				      const char *method, const char *version, const char *upload_data,
				      size_t *upload_data_size, void **con_cls)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;

	if (*con_cls == NULL) {
		*con_cls = con; /* the head: the body comes next */
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	resp = MHD_create_response_from_buffer(sizeof(ceiling_body) - 1, (void *)ceiling_body,
					       MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	rc = MHD_queue_response(con, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return rc;
}

int main(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	const union MHD_DaemonInfo *info;
	struct MHD_Daemon *d;
	struct sockaddr_in sa;
	char line[16];

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC, 0, NULL, NULL,
			     ceiling_access, NULL, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(cores > 1 ? cores : 2),
			     MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_END);
	if (d == NULL) {
		fprintf(stderr, "http_ceiling: cannot start\n");
		return 1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	printf("%u\n", info != NULL ? (unsigned)info->port : 0u);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) != NULL) {
	}
	MHD_stop_daemon(d);
	return 0;
}
