/* thread_policy.h: the measured choice of the auto thread policy
   (parallel.c, "thread policy"; docs/frame_loop.md, "Threads"). Pure logic
   on a state the caller locks, with the times given, so that
   core/tests/test_thread_policy.c can drive it without a clock or a load. */
#ifndef EMBER_THREAD_POLICY_H
#define EMBER_THREAD_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* The two ways a large job may run under auto: as the load sample and the
   lateness back-off say (often on the calling thread alone), or on the
   whole team whatever they say. */
enum { EMBER__ARM_SAMPLED = 0, EMBER__ARM_TEAM = 1 };

#define EMBER__POLICY_KINDS 256     /* kinds of job remembered */
#define EMBER__POLICY_TRIAL 16      /* large jobs in a trial phase */
#define EMBER__POLICY_MAX_EXPLOIT 512   /* the longest exploit phase after a lost trial (large jobs), unless it cost much */
#define EMBER__POLICY_BUDGET 0.005  /* what trials of the slower arm may add to the time, at most */
#define EMBER__POLICY_WAKE_NS 100000.0  /* what waking a sleeping team may add to a job */
#define EMBER__POLICY_RING 8        /* an arm's last times kept for each kind */
/* a trial put off (ember__policy_postpone) runs anyway after this many large jobs */
#define EMBER__POLICY_MAX_WAIT (4 * EMBER__POLICY_MAX_EXPLOIT)
/* a winner's time older than this many large jobs is not compared */
#define EMBER__POLICY_RECENT (8 * EMBER__POLICY_MAX_EXPLOIT)

typedef struct {
    uint64_t key;      /* 0: free */
    double ns[2][EMBER__POLICY_RING];   /* each arm's last times: the trial's, the winner's while recent */
    int32_t n[2];      /* times held in each ring */
    int32_t pos[2];    /* where each ring's next time goes */
    uint32_t phase[2]; /* the phase of each arm's last job */
    int64_t at[2];     /* and its number among large jobs */
} ember__policy_kind;

/* A trial's job: its time, and its kind's usual time under the winner */
typedef struct {
    double ns, ref;
} ember__policy_sample;

typedef struct {
    int winner;          /* the arm exploit phases run */
    int arm;             /* the arm of the current phase */
    uint32_t phase;      /* counts phases from 1 */
    int64_t left;        /* large jobs left in the current phase */
    int64_t jobs;        /* large jobs recorded */
    int64_t exploit;     /* the last exploit phase's length, in large jobs */
    int skip;            /* jobs left unmeasured at the phase's start */
    int seen, slow;      /* a trial's jobs so far, and those far slower than the winner's */
    double seen_ns, seen_ref;   /* the trial's jobs' total time, and their references' (the cost) */
    int n_trial;         /* the trial's timed jobs of kinds the winner has recent times for: */
    ember__policy_sample trial[EMBER__POLICY_TRIAL];
    int slow_run;        /* team jobs in a row twice their kind's median, in a team exploit phase */
    /* a lost trial, judged again on the winner's jobs right after it */
    bool after;          /* the exploit phase now running times them */
    bool lost_scored;    /* the trial ran to its end (else it ended early, on a few jobs) */
    double lost_ratio;   /* its score over the winner's (ended early: its time over its references') */
    int lost_seen;       /* its jobs */
    int64_t lost_exploit;   /* the exploit phase's length before it */
    int n_after;
    ember__policy_sample after_v[EMBER__POLICY_TRIAL];
    int64_t trials, flips, cuts, aborts;
    int64_t postponed;   /* trials put off (ember__policy_postpone) */
    int64_t waited;      /* large jobs the next trial has been put off */
    int64_t arm_jobs[2]; /* large jobs recorded under each arm */
    double last_ratio;   /* the last trial's score over the winner's (0: nothing compared) */
    ember__policy_kind kinds[EMBER__POLICY_KINDS];
} ember__policy;

void ember__policy_init(ember__policy *p, int winner);
/* One large job of kind `key` (nonzero) ran `ns` nanoseconds under `arm`;
   true when this ended the phase (the caller then reads p->arm again). */
bool ember__policy_record(ember__policy *p, uint64_t key, int arm, double ns);
/* The trial that just began is put off: the winner runs a trial's length
   more (its exploit length unchanged), and the caller asks again then;
   false (the trial runs) once it has waited MAX_WAIT large jobs. */
bool ember__policy_postpone(ember__policy *p);

#endif
