/* profile.h: what dispatch.c calls around an op's forward while the op
   profiler (profile.c) is on. */
#ifndef EMBER_PROFILE_H
#define EMBER_PROFILE_H

#include "ops/ops.h"

extern int ember__profiling;   /* ember_profile_enable */

typedef struct {
    int64_t start, outer_nested;
} ember__profile_mark;

ember__profile_mark ember__profile_enter(void);
/* adds the time since m, less that of the ops run inside, to op's account */
void ember__profile_leave(int op, ember__profile_mark m);

#endif
