/* env.c: the clock and the hooks the daemon hands its modules (env.h). */
#include <stddef.h>
#include <time.h>

#include "env.h"

int64_t env_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t env_now_ms(const struct env *env)
{
	return env->env_clock != NULL ? env->env_clock() : env_clock_ms();
}

struct config *env_config_acquire(const struct env *env)
{
	return env->env_cfg_acquire(env->env_cfg_arg);
}

struct config *env_config_retain(const struct env *env, struct config *cf)
{
	return env->env_cfg_retain(env->env_cfg_arg, cf);
}

void env_config_release(const struct env *env, struct config *cf)
{
	env->env_cfg_release(env->env_cfg_arg, cf);
}

void env_outbox_kick(const struct env *env)
{
	if (env->env_outbox_kick != NULL) {
		env->env_outbox_kick(env->env_cfg_arg);
	}
}

int env_outbox_kept(const struct env *env, int64_t row_id, struct outbound_kept *ret)
{
	if (env == NULL || env->env_outbox_kept == NULL) {
		return 0;
	}
	return env->env_outbox_kept(env->env_cfg_arg, row_id, ret);
}

struct http_server *env_http(const struct env *env)
{
	return __atomic_load_n(&env->env_http, __ATOMIC_ACQUIRE);
}

struct health *env_health(const struct env *env)
{
	return __atomic_load_n(&env->env_health, __ATOMIC_ACQUIRE);
}
