/* thread_policy.c: the auto thread policy's measured choice between its
   arms, as pure logic on a state its caller locks (parallel.c says why and
   when; thread_policy.h has the state). core/tests/test_thread_policy.c
   compiles this file into itself to drive it with made-up times. */
#include "thread_policy.h"

#include <string.h>

void ember__policy_init(ember__policy *p, int winner)
{
    memset(p, 0, sizeof *p);
    p->winner = p->arm = winner;
    p->phase = 1;
    p->interval = 1;
    p->left = EMBER__POLICY_TRIAL;
    p->skip = 1;
}

static int64_t last_job(const ember__policy_kind *k) { return k->at[0] > k->at[1] ? k->at[0] : k->at[1]; }

/* The kind's slot: its own, else a free one or the one timed longest ago
   among eight */
static ember__policy_kind *policy_kind(ember__policy *p, uint64_t key)
{
    unsigned h = (unsigned)((key * 0x9E3779B97F4A7C15ULL) >> 56);
    ember__policy_kind *victim = NULL;
    for (unsigned i = 0; i < 8; i++) {
        ember__policy_kind *k = &p->kinds[(h + i) % EMBER__POLICY_KINDS];
        if (k->key == key) return k;
        if (!victim || (victim->key && (!k->key || last_job(k) < last_job(victim)))) victim = k;
    }
    memset(victim, 0, sizeof *victim);
    victim->key = key;
    return victim;
}

static bool recent(const ember__policy *p, const ember__policy_kind *k, int arm)
{
    return k->n[arm] > 0 && p->jobs - k->at[arm] <= EMBER__POLICY_RECENT;
}

/* The next phase: after a trial, the winner's exploit phase, `grow` times
   longer than the last (up to the longest; 0: as long as a trial); after
   an exploit phase, a trial of the other arm. */
static void next_phase(ember__policy *p, bool after_trial, int grow)
{
    if (after_trial) {
        p->trials++;
        if (grow) {
            p->interval *= grow;
            if (p->interval > EMBER__POLICY_MAX_INTERVAL) p->interval = EMBER__POLICY_MAX_INTERVAL;
        }
        p->arm = p->winner;
        p->left = (int64_t)EMBER__POLICY_TRIAL * p->interval;
    } else {
        p->arm = !p->winner;
        p->left = EMBER__POLICY_TRIAL;
    }
    p->phase++;
    p->skip = 1;
}

/* A trial's end: its arm against the winner's recent times of the same kinds. */
static void end_trial(ember__policy *p)
{
    double trial = 0, win = 0;
    int both = 0;
    for (int i = 0; i < EMBER__POLICY_KINDS; i++) {
        const ember__policy_kind *k = &p->kinds[i];
        if (!k->key || k->phase[p->arm] != p->phase || !recent(p, k, p->winner)) continue;
        trial += k->ns[p->arm];
        win += k->ns[p->winner];
        both++;
    }
    if (both && trial < win) {
        p->winner = p->arm;
        p->interval = 1;
        p->flips++;
        next_phase(p, true, 0);
    } else {
        next_phase(p, true, 2);   /* confirmed, or nothing to compare */
    }
}

/* Two team jobs in a row, each twice its kind's time, in an exploit phase
   of the team: the machine got busier (one alone may be a worker
   preempted once). The older times say nothing now: forget them, and end
   the phase with this job. */
static void cut(ember__policy *p)
{
    for (int i = 0; i < EMBER__POLICY_KINDS; i++) p->kinds[i].n[EMBER__ARM_TEAM] = 0;
    p->left = 1;
    p->interval = 1;
    p->slow = 0;
    p->cuts++;
}

bool ember__policy_record(ember__policy *p, uint64_t key, int arm, double ns)
{
    if (arm != p->arm) return false;   /* decided in the phase before */
    p->jobs++;
    ember__policy_kind *k = policy_kind(p, key);
    if (arm != p->winner && recent(p, k, p->winner) && ns > 2 * k->ns[p->winner] + EMBER__POLICY_WAKE_NS) {
        /* a trial job twice the winner's time (and a wake-up): the trial
           has lost, whatever its other jobs would say; end it now, and wait
           longer for the next */
        p->aborts++;
        next_phase(p, true, 4);
        return true;
    }
    if (p->skip > 0) {
        p->skip--;
    } else {
        if (arm == EMBER__ARM_TEAM && arm == p->winner && k->n[arm] >= 2) {
            p->slow = ns > 2 * k->ns[arm] ? p->slow + 1 : 0;
            if (p->slow >= 2) cut(p);
        }
        /* a trial's mean starts with the trial; the winner's runs on while recent */
        if (arm != p->winner ? k->phase[arm] != p->phase : !recent(p, k, arm)) k->n[arm] = 0;
        if (k->n[arm] == 0) k->ns[arm] = 0;
        if (k->n[arm] < 4) k->n[arm]++;
        k->ns[arm] += (ns - k->ns[arm]) / k->n[arm];
        k->phase[arm] = p->phase;
        k->at[arm] = p->jobs;
    }
    if (--p->left > 0) return false;
    if (p->arm != p->winner) end_trial(p);
    else next_phase(p, false, 0);
    return true;
}
