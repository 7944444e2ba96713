package history

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/cache"
	"ray-service/internal/ray"
	"ray-service/internal/usage"
)

// Use is what Prometheus says each Ray cluster's pods used (promql.Querier).
type Use interface {
	ClusterUse(ctx context.Context, from, to time.Time, step time.Duration) (map[usage.ClusterRef]usage.Used, error)
}

// Accounting are the utilization accounting's settings: how often the clusters holding resources are
// credited, and how often (and how finely) their use is read from Prometheus.
type Accounting struct {
	// CreditEvery is how often what every cluster holds is credited (0: a minute).
	CreditEvery time.Duration
	// Use reads the clusters' use; nil: none is measured.
	Use Use
	// MeasureEvery and MeasureStep: every MeasureEvery the use since the last reading is asked for,
	// sampled every MeasureStep.
	MeasureEvery, MeasureStep time.Duration
	// Retention is how long the daily figures are kept (0: always).
	Retention time.Duration
}

// maxMeasureGap is the longest span of use read at once: past it (no replica read for that long) the
// gap stays unmeasured, and says so in reports.
const maxMeasureGap = time.Hour

// accounting is the recorder's state of the accounting (under the recorder's mu).
type accounting struct {
	marks  map[string]*usage.Mark
	byName map[usage.ClusterRef]string
	// gone are the marks of clusters deleted since the last reading of use, whose last use is still
	// to be read.
	gone map[usage.ClusterRef]*usage.Mark
	// makers are the objects that make Ray clusters (RayJobs, RayServices) and the RayCronJobs that make
	// RayJobs, by kind, namespace and name; runs the RayJobs that say they are runs of each RayCronJob
	// (ray.RunOf), by the RayCronJob's key.
	makers map[[3]string]maker
	runs   map[[3]string]map[[3]string]bool
	// spent are the ticks whose run (a RayJob that said it was the run of that tick) was deleted, with
	// when that run was made: KubeRay makes one run a tick, so another that says the same, or a tick
	// that run passed over (ray.CronRun.Covers), is not its. Kept while one could still be believed
	// (ray.ScheduledRunGrace) or one says so.
	spent map[tick]time.Time
	// claims are, by a cluster's UID, the maker its labels and owner reference name (ray.MadeBy), and
	// its state as a cluster of its own; claimants the clusters that claim each maker.
	claims    map[string]claim
	claimants map[[3]string]map[string]bool
	idle      map[usage.ClusterRef]bool
	ledger    *usage.Ledger
	// credited: the ledger holds the minute's credit, written with the figures pending (PutUsage); a
	// ledger of changes alone is written pending (PutPending).
	credited bool
}

// maker is an object that makes Ray clusters: its UID, the creator the service signed on it ("" for
// none: unverified) and the clusters its status names as made for it (Kind.MadeClusters, joined by
// newlines). A RayJob whose creator the service did not sign may be the run a RayCronJob's schedule made
// (run: what it says, ray.RunOf); a RayCronJob says what backs its runs (schedule).
type maker struct {
	uid      types.UID
	creator  string
	made     string
	run      ray.CronRun
	schedule ray.CronJobFacts
}

// tick is one tick of a RayCronJob's schedule: the RayCronJob's key and the tick's Unix time.
type tick struct {
	cron [3]string
	at   int64
}

// claim is what a Ray cluster says made it, and its own state.
type claim struct {
	key  [3]string
	uid  types.UID
	base usage.State
}

func newAccounting() accounting {
	return accounting{marks: map[string]*usage.Mark{}, byName: map[usage.ClusterRef]string{}, gone: map[usage.ClusterRef]*usage.Mark{},
		makers: map[[3]string]maker{}, runs: map[[3]string]map[[3]string]bool{}, spent: map[tick]time.Time{}, claims: map[string]claim{}, claimants: map[[3]string]map[string]bool{},
		idle: map[usage.ClusterRef]bool{}, ledger: usage.NewLedger()}
}

// signedCreator is the creator of an object where the service signed it, else "": an annotation
// anyone who may edit the object could have set bills no one (the report shows it unverified).
func signedCreator(s *ray.Summary) string {
	if s.CreatorSigned {
		return s.Creator
	}
	return ""
}

// accountLocked credits what an object observed held until now, and takes its state from now on.
func (r *Recorder) accountLocked(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary, now time.Time) {
	a := &r.acct
	if !k.IsCluster {
		key := [3]string{k.Kind, o.GetNamespace(), o.GetName()}
		mk := maker{uid: o.GetUID(), creator: signedCreator(s), made: strings.Join(k.MadeClusters(o), "\n")}
		if run := ray.RunOf(o); run != nil && mk.creator == "" {
			mk.run = *run
		}
		if k.Runs != nil {
			mk.schedule = ray.CronJobFactsOf(o)
		}
		old, seen := a.makers[key]
		if seen && old == mk {
			return
		}
		a.unrunLocked(key, old)
		a.makers[key] = mk
		if mk.run.CronJob != "" {
			cron := [3]string{ray.CronJobKind, key[1], mk.run.CronJob}
			if a.runs[cron] == nil {
				a.runs[cron] = map[[3]string]bool{}
			}
			a.runs[cron][key] = true
		}
		// The clusters that claim it are counted to it now, or no more (a maker of the same name made
		// again is another object; a status that names the cluster now); those of the runs of the
		// RayCronJob it is, or whose run it says it is now or said it was, are counted again (one run of
		// a tick).
		r.refileLocked(key, now)
		crons := [][3]string{key}
		if old.run != mk.run {
			crons = append(crons, [3]string{ray.CronJobKind, key[1], old.run.CronJob}, [3]string{ray.CronJobKind, key[1], mk.run.CronJob})
		}
		for _, cron := range crons {
			for job := range a.runs[cron] {
				r.refileLocked(job, now)
			}
		}
		return
	}
	uid, ns, name := string(o.GetUID()), o.GetNamespace(), o.GetName()
	ref := usage.ClusterRef{Namespace: ns, Name: name}
	base := usage.State{Kind: k.Kind, Namespace: ns, Name: name, Cluster: name, Creator: signedCreator(s), Holding: usage.Holding(s.Status),
		Idle: a.idle[ref], Requests: s.Requested}
	a.unclaimLocked(uid)
	if mb := ray.MadeBy(o); mb != nil {
		key := [3]string{mb.Kind, ns, mb.Name}
		a.claims[uid] = claim{key: key, uid: mb.UID, base: base}
		if a.claimants[key] == nil {
			a.claimants[key] = map[string]bool{}
		}
		a.claimants[key][uid] = true
	}
	m := a.marks[uid]
	if m == nil {
		m = &usage.Mark{UID: uid, Since: now}
		a.marks[uid] = m
	}
	a.byName[ref] = uid
	r.changeLocked(m, a.stateOf(uid, base, m), now)
}

// refileLocked counts the clusters that claim the maker of key again.
func (r *Recorder) refileLocked(key [3]string, now time.Time) {
	a := &r.acct
	for uid := range a.claimants[key] {
		if m := a.marks[uid]; m != nil {
			r.changeLocked(m, a.stateOf(uid, a.claims[uid].base, m), now)
		}
	}
}

// unrunLocked forgets the run the maker of key said it was, as mk.
func (a *accounting) unrunLocked(key [3]string, mk maker) {
	if mk.run.CronJob == "" {
		return
	}
	cron := [3]string{ray.CronJobKind, key[1], mk.run.CronJob}
	delete(a.runs[cron], key)
	if len(a.runs[cron]) == 0 {
		delete(a.runs, cron)
	}
}

// goneMakerLocked forgets a maker deleted. A RayJob that said it was the run of a tick spends that tick:
// the other RayJobs that say so are billed to no one (one was not KubeRay's; which, nothing tells), and
// so is one made after. The runs of a RayCronJob deleted stay as counted.
func (r *Recorder) goneMakerLocked(key [3]string, now time.Time) {
	a := &r.acct
	mk, ok := a.makers[key]
	if !ok {
		return
	}
	delete(a.makers, key)
	a.unrunLocked(key, mk)
	if mk.run.CronJob == "" {
		return
	}
	cron := [3]string{ray.CronJobKind, key[1], mk.run.CronJob}
	for tk, made := range a.spent {
		if time.Unix(tk.at, 0).Add(ray.ScheduledRunGrace).Before(now) && !a.claimedLocked(tk, made) {
			delete(a.spent, tk)
		}
	}
	a.spent[tick{cron, mk.run.ScheduledAt.Unix()}] = mk.run.Created
	for job := range a.runs[cron] {
		r.refileLocked(job, now)
	}
}

// claimedLocked tells whether a RayJob the recorder knows says it is the run of tk, or of a tick the run of
// tk, made at made, passed over.
func (a *accounting) claimedLocked(tk tick, made time.Time) bool {
	spentRun := ray.CronRun{ScheduledAt: time.Unix(tk.at, 0).UTC(), Created: made}
	for job := range a.runs[tk.cron] {
		if spentRun.Covers(a.makers[job].run.ScheduledAt) {
			return true
		}
	}
	return false
}

// spentLocked tells whether the tick at of the RayCronJob cron is spent: a run of it, or a run that passed
// over it, was deleted.
func (a *accounting) spentLocked(cron [3]string, at time.Time) bool {
	for tk, made := range a.spent {
		if tk.cron == cron && (&ray.CronRun{ScheduledAt: time.Unix(tk.at, 0).UTC(), Created: made}).Covers(at) {
			return true
		}
	}
	return false
}

// creatorOf is whom the clusters of the maker of key, mk, are billed to: the creator the service signed
// on it, or, for a RayJob a RayCronJob's schedule made, the creator the service signed on that RayCronJob.
// A RayJob is such a run only as far as what KubeRay alone writes backs what it says
// (ray.CronJobFacts.Scheduled), and where no other RayJob made at or after its tick says, or said (spent),
// it is the run of the same tick, or of an earlier tick that it was made after this one (ray.CronRun.Covers):
// KubeRay makes one run a tick, and after a tick it made late (a RayCronJob suspended, the operator
// down) it goes on from the time it made it, so the ticks in between have no run, and the RayCronJob's
// status is past them all the same. Anyone who may create RayJobs could make one that says it is the run
// of such a tick, or of one KubeRay ran. known is
// false where the RayCronJob a RayJob names is not known (not listed yet, or deleted, its runs with it).
func (a *accounting) creatorOf(key [3]string, mk maker) (creator string, known bool) {
	if mk.creator != "" || mk.run.CronJob == "" {
		return mk.creator, true
	}
	cronKey := [3]string{ray.CronJobKind, key[1], mk.run.CronJob}
	cron, ok := a.makers[cronKey]
	if !ok {
		return "", false
	}
	if cron.creator == "" || !cron.schedule.Scheduled(&mk.run) || a.spentLocked(cronKey, mk.run.ScheduledAt) {
		return "", true
	}
	for job := range a.runs[cronKey] {
		// A RayJob made before the tick it names is no run of KubeRay's, nor one of another RayCronJob of
		// that name: neither says anything of this one's tick.
		other := a.makers[job].run
		if job != key && other.UID == cron.schedule.UID && !other.Created.Before(other.ScheduledAt) && other.Covers(mk.run.ScheduledAt) {
			return "", true
		}
	}
	return cron.creator, true
}

// stateOf is whom a cluster's figures are counted to: the maker it claims where that is the object the
// recorder knows of that kind, namespace, name and UID and whose status names the cluster, or named it
// (m is counted to it: a RayService's cluster an upgrade replaced stays the RayService's until KubeRay
// deletes it), with the maker's creator (creatorOf) where the cluster has none signed; else the cluster
// itself as base says. A maker not seen yet (a new writer lists the
// clusters first) leaves the cluster as counted so far, until the maker is seen or the listing ends.
func (a *accounting) stateOf(uid string, base usage.State, m *usage.Mark) usage.State {
	base.Idle = m.Idle
	c, claims := a.claims[uid]
	if !claims {
		return base
	}
	st := base
	mk, known := a.makers[c.key]
	switch {
	case known && mk.uid == c.uid && (ray.Names(strings.Split(mk.made, "\n"), base.Cluster) || m.Kind == c.key[0] && m.Name == c.key[2]):
		st.Kind, st.Name = c.key[0], c.key[2]
		if st.Creator == "" {
			creator, decided := a.creatorOf(c.key, mk)
			if !decided && m.Kind == st.Kind && m.Name == st.Name {
				creator = m.Creator // as counted so far, until the RayCronJob is known
			}
			st.Creator = creator
		}
	case !known && m.Kind == c.key[0] && m.Name == c.key[2]:
		st.Kind, st.Name, st.Creator = m.Kind, m.Name, m.Creator
	}
	return st
}

// changeLocked gives m the state st from now on, where that differs.
func (r *Recorder) changeLocked(m *usage.Mark, st usage.State, now time.Time) {
	if m.State == st {
		return
	}
	r.acct.ledger.Change(m, st, now)
	r.wakeLocked()
}

// unclaimLocked forgets what a cluster claimed.
func (a *accounting) unclaimLocked(uid string) {
	if c, ok := a.claims[uid]; ok {
		delete(a.claimants[c.key], uid)
		if len(a.claimants[c.key]) == 0 {
			delete(a.claimants, c.key)
		}
		delete(a.claims, uid)
	}
}

// goneAccountLocked credits a deleted cluster up to now and ends its credit.
func (r *Recorder) goneAccountLocked(uid string, now time.Time) {
	a := &r.acct
	m := a.marks[uid]
	if m == nil {
		return
	}
	a.ledger.Gone(m, now)
	delete(a.marks, uid)
	a.unclaimLocked(uid)
	ref := usage.ClusterRef{Namespace: m.Namespace, Name: m.Cluster}
	if a.byName[ref] == uid {
		delete(a.byName, ref)
	}
	if r.Accounting.Use != nil {
		a.gone[ref] = m
	}
	r.wakeLocked()
}

// SetIdle takes what the idle detection judges idle now (idle.Clusters): the clusters whose idleness
// changed are credited up to now and counted idle, or not, from now on.
func (r *Recorder) SetIdle(idle map[cache.ClusterRef]*ray.Idle) {
	if !r.leading.Load() {
		return
	}
	r.init()
	next := make(map[usage.ClusterRef]bool, len(idle))
	for ref := range idle {
		next[usage.ClusterRef{Namespace: ref.Namespace, Name: ref.Name}] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setIdleLocked(next, time.Now().UTC())
}

func (r *Recorder) setIdleLocked(next map[usage.ClusterRef]bool, now time.Time) {
	r.acct.idle = next
	for ref, uid := range r.acct.byName {
		m := r.acct.marks[uid]
		if m == nil || m.Idle == next[ref] {
			continue
		}
		st := m.State
		st.Idle = next[ref]
		r.acct.ledger.Change(m, st, now)
		r.wakeLocked()
	}
}

// wakeLocked has the writer write what is queued.
func (r *Recorder) wakeLocked() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// leadAccounting takes the marks of the objects not gone up, as the last writer left them.
func (r *Recorder) leadAccounting(marks map[string]*usage.Mark) {
	r.acct = newAccounting()
	r.terms++
	for uid, m := range marks {
		r.acct.marks[uid] = m
		r.acct.byName[usage.ClusterRef{Namespace: m.Namespace, Name: m.Cluster}] = uid
	}
}

// caughtUpAccountingLocked ends the credit of the clusters the last writer left that are there no more:
// they went while no replica wrote, at a time not known; they are credited up to their last credit.
func (r *Recorder) caughtUpAccountingLocked() {
	for uid, m := range r.acct.marks {
		if kn := r.known[uid]; kn == nil {
			r.goneAccountLocked(uid, m.Since)
		}
	}
	// Every maker there is was listed: a cluster whose maker was not is counted as itself from now.
	now := time.Now().UTC()
	for uid, c := range r.acct.claims {
		if _, known := r.acct.makers[c.key]; !known {
			if m := r.acct.marks[uid]; m != nil {
				base := c.base
				base.Idle = m.Idle
				r.changeLocked(m, base, now)
			}
		}
	}
}

// creditAll credits every cluster holding resources up to now (the daily rows stay current, and a new
// writer resumes from there).
func (r *Recorder) creditAll(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.acct.marks {
		if m.Holding {
			r.acct.ledger.Credit(m, now)
		}
	}
	r.acct.credited = true
	r.wakeLocked()
}

// writeAccounting writes the credits gathered: the minute's with what is pending, changes alone as
// pending. What fails goes back to be written with what follows.
func (r *Recorder) writeAccounting(ctx context.Context) {
	r.mu.Lock()
	l, credited := r.acct.ledger, r.acct.credited
	r.acct.ledger, r.acct.credited = usage.NewLedger(), false
	r.mu.Unlock()
	put := r.Store.PutPending
	if credited {
		put = r.Store.PutUsage
	} else if l.Empty() {
		return
	}
	if err := put(ctx, l); err != nil {
		if ctx.Err() == nil {
			r.Log.Warn("history: writing the utilization figures", zap.Error(err))
		}
		r.mu.Lock()
		if r.leading.Load() {
			r.acct.ledger.Merge(l)
			r.acct.credited = r.acct.credited || credited
		}
		r.mu.Unlock()
	}
}

// account credits the clusters every CreditEvery and reads their use every MeasureEvery while this
// replica leads, and removes the figures past the retention every hour.
func (r *Recorder) account(ctx context.Context) {
	every := r.Accounting.CreditEvery
	if every <= 0 {
		every = time.Minute
	}
	credit := time.NewTicker(every)
	defer credit.Stop()
	measureEvery := r.Accounting.MeasureEvery
	if measureEvery <= 0 {
		measureEvery = 5 * time.Minute
	}
	measure := time.NewTicker(measureEvery)
	defer measure.Stop()
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	checked := 0 // the term whose prune summed the totals again
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-credit.C:
			if r.leading.Load() {
				r.creditAll(now.UTC())
			}
		case now := <-measure.C:
			if r.leading.Load() && r.Accounting.Use != nil {
				r.measure(ctx, now.UTC())
			}
		case now := <-prune.C:
			if r.leading.Load() && r.Accounting.Retention > 0 {
				r.mu.Lock()
				term := r.terms
				r.mu.Unlock()
				pruned, err := r.Store.PruneUsage(ctx, now.Add(-r.Accounting.Retention), term != checked)
				if err == nil {
					checked = term
				}
				if err != nil {
					r.Log.Warn("history: removing the utilization figures past their retention", zap.Error(err))
				} else if pruned.Corrected > 0 {
					// A writer that did not keep them (an older replica's prune in a rolling upgrade).
					r.Log.Warn("history: objects' utilization totals differed from their days and were summed again",
						zap.Int64("objects", pruned.Corrected))
				}
			}
		}
	}
}

// measure reads what each cluster used since the last reading (at most maxMeasureGap back), split at UTC
// midnights, and writes it with the new bound; what fails is read again next time.
func (r *Recorder) measure(ctx context.Context, now time.Time) {
	step := r.Accounting.MeasureStep
	if step <= 0 {
		step = 15 * time.Second
	}
	to := now.Truncate(step)
	from, err := r.Store.MeasuredTo(ctx)
	if err != nil {
		r.Log.Warn("history: reading up to when use was measured", zap.Error(err))
		return
	}
	if from.IsZero() || to.Sub(from) > maxMeasureGap {
		from = to.Add(-min(maxMeasureGap, max(r.Accounting.MeasureEvery, step)))
	}
	if !to.After(from) {
		return
	}
	l := usage.NewLedger()
	for start := from; start.Before(to); {
		end := time.Unix(usage.DayOf(start)+86400, 0).UTC()
		if to.Before(end) {
			end = to
		}
		used, err := r.Accounting.Use.ClusterUse(ctx, start, end, step)
		if err != nil {
			r.Log.Warn("history: reading the Ray clusters' use from Prometheus", zap.Error(err))
			return
		}
		day := usage.DayOf(start)
		r.mu.Lock()
		for ref, u := range used {
			m := r.acct.gone[ref]
			if uid, ok := r.acct.byName[ref]; ok && r.acct.marks[uid] != nil {
				m = r.acct.marks[uid]
			}
			if m == nil {
				continue // not a cluster this writer knows
			}
			l.Used(m, day, u.CPUSeconds, u.MemoryByteSeconds, u.GPUSeconds, u.NPUSeconds)
		}
		r.mu.Unlock()
		l.Measured[day] += end.Sub(start).Seconds()
		start = end
	}
	if err := r.Store.PutMeasured(ctx, l, to); err != nil {
		if ctx.Err() == nil {
			r.Log.Warn("history: writing the Ray clusters' use", zap.Error(err))
		}
		return
	}
	r.mu.Lock()
	// The clusters gone before this reading began have had their last use read.
	for ref, m := range r.acct.gone {
		if m.Since.Before(from) {
			delete(r.acct.gone, ref)
		}
	}
	r.mu.Unlock()
}
