/* thread_policy.c: the auto thread policy's measured choice between its
   arms, as pure logic on a state its caller locks (parallel.c says why and
   when; thread_policy.h has the state). core/tests/test_thread_policy.c
   compiles this file into itself to drive it with made-up times.

   Large jobs are counted in phases. An exploit phase runs the arm that won
   the last comparison (the winner), 16 to MAX_EXPLOIT (512) large jobs
   long (longer where the other arm is very slow); a trial phase then runs
   the other arm for 16. The first job of a phase is not timed (it may
   find the team asleep, or still spinning from the other arm). Each timed
   job's time goes to its kind (parallel.c keys a product by its shape,
   else a kernel by its job's size and grain): the kind keeps each arm's
   last 8 times, the trial's from this trial alone, the winner's across
   its phases while recent (timed in the last 4096 large jobs). Times are
   per kind because phases do not line up with a step's sequence of jobs.

   The comparison is robust, because beside a busy neighbour two threads'
   times spread widely: a worker that shares its core with another process
   is now and then preempted inside its piece of a job, and that job waits
   out a time slice (milliseconds instead of 100 us), while most jobs take
   half the time they take on one thread. A rule that let one such job
   decide (a trial's sum or mean, an early end at one slow job) kept the
   team off a step that was 15% faster on it. So:
   - a kind's usual time under an arm is the mean of its last 8 times with
     the slowest counted as the next slowest;
   - at a trial's end each of its timed jobs of a kind the winner has recent
     times for is set against that kind's usual winner time (its reference),
     and the trial's score is its jobs' total time over their references'
     total, the slowest eighth of the jobs (by time over reference, rounded)
     counted at the ratio of the slowest of the rest (a winsorized ratio of
     totals): larger jobs weigh more, as in a step; one preempted job in
     eight changes nothing; a tail of a quarter of the jobs still counts;
   - the winner's own last times of the same kinds get the same score
     against the same references, so that its spread counts as the trial's;
   - the trial's arm wins if its score is smaller, with at least 4 jobs
     compared, and the old winner is tried again 16 jobs on;
   - a trial ends early, losing, on strong evidence only, and never on
     its first job (after a stretch of the sampled arm, the team's first
     job may wait for its workers' cores to wake: 1.7 ms more, on a loaded
     2-core VM, for a step of 0.43 ms): its second job over 4 times its
     reference plus 100 us (a wake-up), as when every job of two threads
     waits out some of a busy host thread's time slice; two of its later
     jobs, and more than half of them, each over 1.5 times its reference
     plus 100 us; or, from its 4th timed job on, its score so far over 1.3
     (robust as above: one or two slow jobs among the first eight do not
     end it);
   - a lost trial is judged again on the winner's next 16 jobs, timed
     against the same references (the same minutes, on both sides of the
     trial): if they too are slower than the references (the load rose,
     and the trial met it first), the trial's loss is divided by their
     score, and the trial may win after all;
   - what is left of the loss sets the next exploit phase's length: so
     long that the trial's cost (its loss times its jobs) is BUDGET (0.5%)
     of the time, but at most twice the phase before the trial, and at
     most MAX_EXPLOIT (512) jobs unless the trial cost more than MAX_COST
     (2%) of those. An arm slower by 2% is tried again after about 64
     jobs; one 4 to 50 times slower (two threads beside a busy host
     thread), whose trial ends at its second to fourth job, costs 2 to 3%
     of the time. Not less often, because whether two threads win changes
     over seconds (on a 2-core VM, two threads took a medium step in 0.5
     ms in most rounds of a run and in 4-5 ms in others): after such a
     change, the better arm wins within about 512 jobs (a hundred medium
     steps), more when the slower arm was very slow or a trial meets a
     preempted job;
   - in a team exploit phase, four team jobs in a row each over twice its
     kind's median team time (the median is still the usual time when three
     of the eight are not) show the machine got busier, where one to three
     may be a worker preempted: the team's times are forgotten and the jobs
     go back to the sampled arm, which follows the load, until the team's
     next trial (16 jobs on) decides on new times.
   No result depends on which arm runs a job (every kernel's pieces are
   fixed by its shapes), so none of this changes a bit, only the time; the
   work here is a few sorts of at most 16 numbers a phase, on the calling
   thread under parallel.c's lock. */
#include "thread_policy.h"

#include <string.h>

#define SLOW_TRIAL 1.5   /* a trial job this many times its reference (plus a wake-up) is far slower */
#define FAR_TRIAL 4.0    /* a trial's second job this many times its reference (plus a wake-up) ends it */
#define SLOW_TEAM 2.0    /* a team job this many times its kind's median, in a team exploit phase, */
#define SLOW_RUN 4       /* this many in a row: the machine got busier */
#define MIN_COMPARED 4   /* a trial's timed jobs a decision needs */
#define SLOW_SCORE 1.3   /* a trial whose score is over this so far has lost */
#define RAMP 2.0         /* an exploit phase after a lost trial is at most this many times the last, */
#define MAX_COST 0.02    /* and MAX_EXPLOIT unless the trial cost more than this share of those jobs */

void ember__policy_init(ember__policy *p, int winner)
{
    memset(p, 0, sizeof *p);
    p->winner = p->arm = winner;
    p->phase = 1;
    p->exploit = p->left = EMBER__POLICY_TRIAL;
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

/* An arm's times of a kind are k->ns[arm][0 .. n-1], the oldest overwritten. */
static void ring_add(ember__policy_kind *k, int arm, double ns)
{
    k->ns[arm][k->pos[arm]] = ns;
    k->pos[arm] = (k->pos[arm] + 1) % EMBER__POLICY_RING;
    if (k->n[arm] < EMBER__POLICY_RING) k->n[arm]++;
}

/* The slowest eighth of n times (rounded) is counted as the slowest
   of the rest: one preempted job among eight changes nothing, a frequent
   tail still counts. */
static int kept(int n) { return n - (n + 4) / 8; }

/* An arm's times of a kind, sorted into v; how many */
static int sorted_times(const ember__policy_kind *k, int arm, double *v)
{
    int n = k->n[arm];
    for (int i = 0; i < n; i++) {   /* insertion sort: at most 8 */
        int j = i;
        for (; j > 0 && v[j - 1] > k->ns[arm][i]; j--) v[j] = v[j - 1];
        v[j] = k->ns[arm][i];
    }
    return n;
}

/* What the kind typically takes under the arm: the mean of its times, so
   counted */
static double kind_ns(const ember__policy_kind *k, int arm)
{
    double v[EMBER__POLICY_RING], sum = 0;
    int n = sorted_times(k, arm, v);
    for (int i = 0; i < n; i++) sum += v[i < kept(n) ? i : kept(n) - 1];
    return n ? sum / n : 0;
}

/* The median: still a usual time when three of the eight are not */
static double kind_median(const ember__policy_kind *k, int arm)
{
    double v[EMBER__POLICY_RING];
    int n = sorted_times(k, arm, v);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef ember__policy_sample sample;

static double ratio(sample s) { return s.ns / (s.ref > 0 ? s.ref : 1); }

/* The jobs' total time over their references' total, the slowest eighth
   (by ratio) counted at the ratio of the slowest of the rest. */
static double robust_ratio(sample *s, int n)
{
    for (int i = 1; i < n; i++) {
        sample x = s[i];
        int j = i;
        for (; j > 0 && ratio(s[j - 1]) > ratio(x); j--) s[j] = s[j - 1];
        s[j] = x;
    }
    double ns = 0, ref = 0;
    for (int i = 0; i < n; i++) {
        ns += i < kept(n) ? s[i].ns : s[i].ref * ratio(s[kept(n) - 1]);
        ref += s[i].ref;
    }
    return ref > 0 ? ns / ref : 1;
}

/* The next phase: after a trial (or a cut), the winner's exploit phase,
   `jobs` long (a trial's length at least); after an
   exploit phase, a trial of the other arm. */
static void next_phase(ember__policy *p, bool after_trial, double jobs)
{
    if (after_trial) {
        if (jobs < EMBER__POLICY_TRIAL) jobs = EMBER__POLICY_TRIAL;
        p->arm = p->winner;
        p->exploit = p->left = (int64_t)jobs;
    } else {
        p->arm = !p->winner;
        p->left = EMBER__POLICY_TRIAL;
    }
    p->phase++;
    p->skip = !after_trial && p->arm == EMBER__ARM_TEAM ? 3 : 1;
    p->seen = p->slow = p->slow_run = p->n_trial = p->n_after = 0;
    p->seen_ns = p->seen_ref = 0;
    p->after = false;
}

/* The exploit phase after a trial of `seen` jobs that lost by `excess`
   (its arm's time over the winner's, less 1): as long as makes the
   trial's cost, `excess` times its jobs, BUDGET of the two phases' time;
   at most RAMP times as long as the one before the trial, and MAX_EXPLOIT
   unless the cost is over MAX_COST of that, so that an arm that was
   slower a few hundred jobs ago is tried again soon. */
static double backoff(int64_t before, double excess, int seen)
{
    double jobs = excess * seen / EMBER__POLICY_BUDGET, most = excess * seen / MAX_COST;
    if (most < EMBER__POLICY_MAX_EXPLOIT) most = EMBER__POLICY_MAX_EXPLOIT;
    if (jobs > RAMP * (double)before) jobs = RAMP * (double)before;
    return jobs < most ? jobs : most;
}

/* A trial lost by `ratio` (scored: against the winner's score; else its
   time over its references'): the winner runs a trial's length, its jobs
   set against their kinds' usual times as the trial's were, before the
   loss is weighed. */
static void lost(ember__policy *p, double ratio, bool scored)
{
    int seen = p->seen;
    int64_t before = p->exploit;
    next_phase(p, true, EMBER__POLICY_TRIAL);
    p->after = true;
    p->lost_scored = scored;
    p->lost_ratio = ratio;
    p->lost_seen = seen;
    p->lost_exploit = before;
}

/* The winner's jobs after a lost trial took `q` times their references
   (its robust ratio; 1 if they were faster): the load rose, and the trial
   met it first. The trial is set against the slower of the winner's times
   before and after it: it may win now; else the back-off follows from
   what is left of its loss. */
static void weigh_loss(ember__policy *p)
{
    double q = 1;
    if (p->n_after >= MIN_COMPARED) {
        sample s[EMBER__POLICY_TRIAL];
        memcpy(s, p->after_v, sizeof *s * (size_t)p->n_after);
        q = robust_ratio(s, p->n_after);
        if (q < 1) q = 1;
    }
    double r = p->lost_ratio / q;
    if (p->lost_scored) p->last_ratio = r;
    if (p->lost_scored && r < 1) {
        p->winner = !p->winner;
        p->flips++;
        next_phase(p, true, EMBER__POLICY_TRIAL);   /* the old winner is tried again soon */
        return;
    }
    next_phase(p, true, backoff(p->lost_exploit, r - 1, p->lost_seen));
}

/* The trial's robust ratio so far */
static double trial_score(const ember__policy *p)
{
    sample s[EMBER__POLICY_TRIAL];
    memcpy(s, p->trial, sizeof *s * (size_t)p->n_trial);
    return robust_ratio(s, p->n_trial);
}

/* A trial's job: true when the trial has lost on strong evidence */
static bool trial_lost(ember__policy *p, const ember__policy_kind *k, double ns, bool timed)
{
    if (++p->seen == 1) return false;   /* the first: its workers' cores may be waking */
    if (!recent(p, k, p->winner)) return false;
    double ref = kind_ns(k, p->winner);
    p->seen_ns += ns;
    p->seen_ref += ref;
    if (p->seen == 2 && ns > FAR_TRIAL * ref + EMBER__POLICY_WAKE_NS) return true;
    if (ns > SLOW_TRIAL * ref + EMBER__POLICY_WAKE_NS) p->slow++;
    if (timed && p->n_trial < EMBER__POLICY_TRIAL) p->trial[p->n_trial++] = (sample){ns, ref};
    if (p->slow >= 2 && 2 * p->slow > p->seen - 1) return true;
    return p->n_trial >= MIN_COMPARED && trial_score(p) > SLOW_SCORE;
}

/* A trial's end: its arm's robust ratio against the winner's, over the
   kinds both timed. */
static void end_trial(ember__policy *p)
{
    sample win[EMBER__POLICY_TRIAL * EMBER__POLICY_RING];
    int n_win = 0;
    for (int i = 0; i < EMBER__POLICY_KINDS; i++) {
        const ember__policy_kind *k = &p->kinds[i];
        if (!k->key || k->phase[p->arm] != p->phase || !recent(p, k, p->winner)) continue;
        double ref = kind_ns(k, p->winner);
        for (int j = 0; j < k->n[p->winner] && n_win < EMBER__POLICY_TRIAL * EMBER__POLICY_RING; j++)
            win[n_win++] = (sample){k->ns[p->winner][j], ref};
    }
    p->trials++;
    p->last_ratio = 0;
    if (p->n_trial >= MIN_COMPARED) {
        double t = trial_score(p), w = robust_ratio(win, n_win);
        p->last_ratio = t / w;
        if (t < w) {
            p->winner = p->arm;
            p->flips++;
            next_phase(p, true, EMBER__POLICY_TRIAL);   /* the old winner is tried again soon */
            return;
        }
        lost(p, p->last_ratio, true);
        return;
    }
    /* too little to compare (no kind the winner has recent times for): the
       cost is unknown, so back off further, up to four longest phases */
    double jobs = 2.0 * (double)p->exploit;
    next_phase(p, true, jobs < 4 * EMBER__POLICY_MAX_EXPLOIT ? jobs : 4 * EMBER__POLICY_MAX_EXPLOIT);
}

/* The machine got busier under the team: its older times say nothing now.
   Forget them, and hand the jobs to the sampled arm (which follows the
   load) until a trial of the team decides on new times. */
static void cut(ember__policy *p)
{
    for (int i = 0; i < EMBER__POLICY_KINDS; i++) p->kinds[i].n[EMBER__ARM_TEAM] = p->kinds[i].pos[EMBER__ARM_TEAM] = 0;
    p->winner = EMBER__ARM_SAMPLED;
    p->cuts++;
    next_phase(p, true, EMBER__POLICY_TRIAL);
}

bool ember__policy_postpone(ember__policy *p)
{
    if (p->waited >= EMBER__POLICY_MAX_WAIT) return false;   /* a trial now and then, whatever the load says */
    p->waited += EMBER__POLICY_TRIAL;
    int64_t exploit = p->exploit;
    next_phase(p, true, EMBER__POLICY_TRIAL);
    p->exploit = exploit;   /* the back-off after the trial, when it runs, ramps from the phase before */
    p->postponed++;
    return true;
}

bool ember__policy_record(ember__policy *p, uint64_t key, int arm, double ns)
{
    if (arm != p->arm) return false;   /* decided in the phase before */
    p->jobs++;
    p->arm_jobs[arm]++;
    ember__policy_kind *k = policy_kind(p, key);
    bool timed = p->skip == 0;
    if (!timed) p->skip--;
    if (arm != p->winner) p->waited = 0;   /* a trial runs */
    if (arm != p->winner && trial_lost(p, k, ns, timed)) {
        /* far slower: the trial has lost, whatever its other jobs would
           say; end it now, and weigh the loss on the winner's next jobs */
        p->trials++;
        p->aborts++;
        lost(p, p->seen_ns / p->seen_ref, false);
        return true;
    }
    if (timed) {
        if (arm == EMBER__ARM_TEAM && arm == p->winner && k->n[arm] >= 3) {
            p->slow_run = ns > SLOW_TEAM * kind_median(k, arm) ? p->slow_run + 1 : 0;
            if (p->slow_run >= SLOW_RUN) {
                cut(p);
                return true;
            }
        }
        if (p->after && p->n_after < EMBER__POLICY_TRIAL && recent(p, k, arm))
            p->after_v[p->n_after++] = (sample){ns, kind_ns(k, arm)};
        /* a trial's times start with the trial; the winner's run on while recent */
        if (arm != p->winner ? k->phase[arm] != p->phase : !recent(p, k, arm)) k->n[arm] = k->pos[arm] = 0;
        ring_add(k, arm, ns);
        k->phase[arm] = p->phase;
        k->at[arm] = p->jobs;
    }
    if (--p->left > 0) return false;
    if (p->arm != p->winner) end_trial(p);
    else if (p->after) weigh_loss(p);
    else next_phase(p, false, 0);
    return true;
}
