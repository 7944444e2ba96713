package usage

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"ray-service/internal/cache"
	"ray-service/internal/lease"
	"ray-service/internal/ray"
	"ray-service/internal/signing"
)

// Use is what Prometheus says each Ray cluster's pods used (promql.Querier).
type Use interface {
	ClusterUse(ctx context.Context, from, to time.Time, step time.Duration) (map[ray.ClusterRef]Used, error)
}

// Settings are the accounting's: how often the clusters holding resources are credited, and how often
// (and how finely) their use is read from Prometheus.
type Settings struct {
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

// Accountant credits each Ray cluster with what it holds, to whom it is counted, from what the watch
// cache receives (it is one of the cache's observers, cache.Observer), and reads what the clusters used
// from Prometheus. Only the holder of the service's Lease accounts (Hooks); the other replicas drop what
// they see. A new holder takes the credit up from the marks the last one left, then lists every object
// once: a handover or a restart counts nothing twice, and a cluster that went while no replica
// accounted is credited up to its last credit.
type Accountant struct {
	Store *Store
	Kinds *ray.Kinds
	// Serves tells the kinds the cluster serves now (the watch cache's): an optional kind without its
	// CRD is not listed. Nil: all.
	Serves func(*ray.Kind) bool
	// Dynamic is the service's own client: the holder of the Lease lists the Ray objects with it.
	Dynamic dynamic.Interface
	Log     *zap.Logger
	// Signer tells the creators the service signed (the watch cache's summaries say it too) from those
	// anyone could have written: only those are billed (nil: none is).
	Signer *signing.Signer
	// Value values a summary's requests on what the watch cache knows now (its claims, the nodes' word
	// on a device): what a replica catching up reads is valued as the cache publishes it. Nil: as read.
	Value    func(*ray.Summary) *ray.Summary
	Settings Settings

	leading atomic.Bool
	once    sync.Once
	wake    chan struct{}
	mu      sync.Mutex
	// acct is the state of the accounting (mu); seen the objects observed since this replica leads and
	// not gone (mu), which a new holder compares with the marks it took up.
	acct accounting
	seen map[string]bool
	// terms counts the times this replica took the accounting up (mu): the first prune of each sums the
	// objects' totals again (Store.PruneUsage).
	terms int
	// watched are the objects the watch told of (a version, or their deletion) while this replica lists
	// every object to catch up, by UID (mu; nil when it does not list). A page the apiserver answered
	// before such a change may be read after the watch said so: what the page holds of them is older,
	// and is not taken. It would bring a cluster deleted back, to be credited as if it held its
	// resources still with no deletion left to end its credit, or a cluster stopped back to running,
	// until it changes again (the informers do not resync by default). The watch tells every version
	// in order, so that what it says of an object is, or will be, as new as any page.
	watched map[string]bool
}

// maxMeasureGap is the longest span of use read at once: past it (no replica read for that long) the
// gap stays unmeasured, and says so in reports.
const maxMeasureGap = time.Hour

// accounting is the accountant's state of the accounting (under the accountant's mu).
type accounting struct {
	marks  map[string]*Mark
	byName map[ray.ClusterRef]string
	// gone are the marks of clusters deleted since the last reading of use, whose last use is still
	// to be read.
	gone map[ray.ClusterRef]*Mark
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
	idle      map[ray.ClusterRef]bool
	ledger    *Ledger
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
	base State
}

func newAccounting() accounting {
	return accounting{marks: map[string]*Mark{}, byName: map[ray.ClusterRef]string{}, gone: map[ray.ClusterRef]*Mark{},
		makers: map[[3]string]maker{}, runs: map[[3]string]map[[3]string]bool{}, spent: map[tick]time.Time{}, claims: map[string]claim{}, claimants: map[[3]string]map[string]bool{},
		idle: map[ray.ClusterRef]bool{}, ledger: NewLedger()}
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
func (ac *Accountant) accountLocked(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary, now time.Time) {
	a := &ac.acct
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
		ac.refileLocked(key, now)
		crons := [][3]string{key}
		if old.run != mk.run {
			crons = append(crons, [3]string{ray.CronJobKind, key[1], old.run.CronJob}, [3]string{ray.CronJobKind, key[1], mk.run.CronJob})
		}
		for _, cron := range crons {
			for job := range a.runs[cron] {
				ac.refileLocked(job, now)
			}
		}
		return
	}
	uid, ns, name := string(o.GetUID()), o.GetNamespace(), o.GetName()
	ref := ray.ClusterRef{Namespace: ns, Name: name}
	base := State{Kind: k.Kind, Namespace: ns, Name: name, Cluster: name, Creator: signedCreator(s), Holding: Holding(s.Status),
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
		m = &Mark{UID: uid, Since: now}
		a.marks[uid] = m
	}
	a.byName[ref] = uid
	ac.changeLocked(m, a.stateOf(uid, base, m), now)
}

// refileLocked counts the clusters that claim the maker of key again.
func (ac *Accountant) refileLocked(key [3]string, now time.Time) {
	a := &ac.acct
	for uid := range a.claimants[key] {
		if m := a.marks[uid]; m != nil {
			ac.changeLocked(m, a.stateOf(uid, a.claims[uid].base, m), now)
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
func (ac *Accountant) goneMakerLocked(key [3]string, now time.Time) {
	a := &ac.acct
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
		ac.refileLocked(job, now)
	}
}

// claimedLocked tells whether a RayJob the accountant knows says it is the run of tk, or of a tick the run of
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
// accountant knows of that kind, namespace, name and UID and whose status names the cluster, or named it
// (m is counted to it: a RayService's cluster an upgrade replaced stays the RayService's until KubeRay
// deletes it), with the maker's creator (creatorOf) where the cluster has none signed; else the cluster
// itself as base says. A maker not seen yet (a new writer lists the
// clusters first) leaves the cluster as counted so far, until the maker is seen or the listing ends.
func (a *accounting) stateOf(uid string, base State, m *Mark) State {
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
func (ac *Accountant) changeLocked(m *Mark, st State, now time.Time) {
	if m.Same(st) {
		return
	}
	ac.acct.ledger.Change(m, st, now)
	ac.wakeLocked()
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
func (ac *Accountant) goneAccountLocked(uid string, now time.Time) {
	a := &ac.acct
	m := a.marks[uid]
	if m == nil {
		return
	}
	a.ledger.Gone(m, now)
	delete(a.marks, uid)
	a.unclaimLocked(uid)
	ref := ray.ClusterRef{Namespace: m.Namespace, Name: m.Cluster}
	if a.byName[ref] == uid {
		delete(a.byName, ref)
	}
	if ac.Settings.Use != nil {
		a.gone[ref] = m
	}
	ac.wakeLocked()
}

// SetIdle takes what the idle detection judges idle now (idle.Clusters): the clusters whose idleness
// changed are credited up to now and counted idle, or not, from now on.
func (ac *Accountant) SetIdle(idle map[ray.ClusterRef]*ray.Idle) {
	if !ac.leading.Load() {
		return
	}
	ac.init()
	next := make(map[ray.ClusterRef]bool, len(idle))
	for ref := range idle {
		next[ref] = true
	}
	ac.mu.Lock()
	defer ac.mu.Unlock()
	ac.setIdleLocked(next, time.Now().UTC())
}

func (ac *Accountant) setIdleLocked(next map[ray.ClusterRef]bool, now time.Time) {
	ac.acct.idle = next
	for ref, uid := range ac.acct.byName {
		m := ac.acct.marks[uid]
		if m == nil || m.Idle == next[ref] {
			continue
		}
		st := m.State
		st.Idle = next[ref]
		ac.acct.ledger.Change(m, st, now)
		ac.wakeLocked()
	}
}

// wakeLocked has the writer write what is queued.
func (ac *Accountant) wakeLocked() {
	select {
	case ac.wake <- struct{}{}:
	default:
	}
}

// leadAccounting takes the marks of the objects not gone up, as the last writer left them.
func (ac *Accountant) leadAccounting(marks map[string]*Mark) {
	ac.acct = newAccounting()
	ac.terms++
	for uid, m := range marks {
		ac.acct.marks[uid] = m
		ac.acct.byName[ray.ClusterRef{Namespace: m.Namespace, Name: m.Cluster}] = uid
	}
}

// caughtUpAccountingLocked ends the credit of the clusters the last writer left that are there no more:
// they went while no replica wrote, at a time not known; they are credited up to their last credit.
func (ac *Accountant) caughtUpAccountingLocked() {
	for uid, m := range ac.acct.marks {
		if !ac.seen[uid] {
			ac.goneAccountLocked(uid, m.Since)
		}
	}
	// Every maker there is was listed: a cluster whose maker was not is counted as itself from now.
	now := time.Now().UTC()
	for uid, c := range ac.acct.claims {
		if _, known := ac.acct.makers[c.key]; !known {
			if m := ac.acct.marks[uid]; m != nil {
				base := c.base
				base.Idle = m.Idle
				ac.changeLocked(m, base, now)
			}
		}
	}
}

// creditAll credits every cluster holding resources up to now (the daily rows stay current, and a new
// writer resumes from there).
func (ac *Accountant) creditAll(now time.Time) {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	for _, m := range ac.acct.marks {
		if m.Holding {
			ac.acct.ledger.Credit(m, now)
		}
	}
	ac.acct.credited = true
	ac.wakeLocked()
}

// writeAccounting writes the credits gathered: the minute's with what is pending, changes alone as
// pending. What fails goes back to be written with what follows; it tells whether nothing did.
func (ac *Accountant) writeAccounting(ctx context.Context) bool {
	ac.mu.Lock()
	l, credited := ac.acct.ledger, ac.acct.credited
	ac.acct.ledger, ac.acct.credited = NewLedger(), false
	ac.mu.Unlock()
	put := ac.Store.PutPending
	if credited {
		put = ac.Store.PutUsage
	} else if l.Empty() {
		return true
	}
	if err := put(ctx, l); err != nil {
		if ctx.Err() == nil {
			ac.Log.Warn("utilization: writing the figures", zap.Error(err))
		}
		ac.mu.Lock()
		if ac.leading.Load() {
			ac.acct.ledger.Merge(l)
			ac.acct.credited = ac.acct.credited || credited
		}
		ac.mu.Unlock()
		return false
	}
	return true
}

// account credits the clusters every CreditEvery and reads their use every MeasureEvery while this
// replica leads, and every hour refreshes the planner's statistics and removes the figures past the
// retention.
func (ac *Accountant) account(ctx context.Context) {
	every := ac.Settings.CreditEvery
	if every <= 0 {
		every = time.Minute
	}
	credit := time.NewTicker(every)
	defer credit.Stop()
	measureEvery := ac.Settings.MeasureEvery
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
			if ac.leading.Load() {
				ac.creditAll(now.UTC())
			}
		case now := <-measure.C:
			if ac.leading.Load() && ac.Settings.Use != nil {
				ac.measure(ctx, now.UTC())
			}
		case now := <-prune.C:
			if ac.leading.Load() {
				if err := ac.Store.Optimize(ctx); err != nil {
					ac.Log.Warn("utilization: refreshing the query planner's statistics", zap.Error(err))
				}
			}
			if ac.leading.Load() && ac.Settings.Retention > 0 {
				ac.mu.Lock()
				term := ac.terms
				ac.mu.Unlock()
				pruned, err := ac.Store.PruneUsage(ctx, now.Add(-ac.Settings.Retention), term != checked)
				if err == nil {
					checked = term
				}
				if err != nil {
					ac.Log.Warn("utilization: removing the utilization figures past their retention", zap.Error(err))
				} else if pruned.Corrected > 0 {
					// A writer that did not keep them (an older replica's prune in a rolling upgrade).
					ac.Log.Warn("utilization: objects' utilization totals differed from their days and were summed again",
						zap.Int64("objects", pruned.Corrected))
				}
			}
		}
	}
}

// measure reads what each cluster used since the last reading (at most maxMeasureGap back), split at UTC
// midnights, and writes it with the new bound; what fails is read again next time.
func (ac *Accountant) measure(ctx context.Context, now time.Time) {
	step := ac.Settings.MeasureStep
	if step <= 0 {
		step = 15 * time.Second
	}
	to := now.Truncate(step)
	from, err := ac.Store.MeasuredTo(ctx)
	if err != nil {
		ac.Log.Warn("utilization: reading up to when use was measured", zap.Error(err))
		return
	}
	if from.IsZero() || to.Sub(from) > maxMeasureGap {
		from = to.Add(-min(maxMeasureGap, max(ac.Settings.MeasureEvery, step)))
	}
	if !to.After(from) {
		return
	}
	l := NewLedger()
	for start := from; start.Before(to); {
		end := time.Unix(DayOf(start)+86400, 0).UTC()
		if to.Before(end) {
			end = to
		}
		used, err := ac.Settings.Use.ClusterUse(ctx, start, end, step)
		if err != nil {
			ac.Log.Warn("utilization: reading the Ray clusters' use from Prometheus", zap.Error(err))
			return
		}
		day := DayOf(start)
		ac.mu.Lock()
		for ref, u := range used {
			m := ac.acct.gone[ref]
			if uid, ok := ac.acct.byName[ref]; ok && ac.acct.marks[uid] != nil {
				m = ac.acct.marks[uid]
			}
			if m == nil {
				continue // not a cluster this writer knows
			}
			l.Used(m, day, u.CPUSeconds, u.MemoryByteSeconds, u.GPUSeconds, u.NPUSeconds)
		}
		ac.mu.Unlock()
		l.Measured[day] += end.Sub(start).Seconds()
		start = end
	}
	if err := ac.Store.PutMeasured(ctx, l, to); err != nil {
		if ctx.Err() == nil {
			ac.Log.Warn("utilization: writing the Ray clusters' use", zap.Error(err))
		}
		return
	}
	ac.mu.Lock()
	// The clusters gone before this reading began have had their last use read.
	for ref, m := range ac.acct.gone {
		if m.Since.Before(from) {
			delete(ac.acct.gone, ref)
		}
	}
	ac.mu.Unlock()
}

func (ac *Accountant) init() {
	ac.once.Do(func() {
		ac.wake = make(chan struct{}, 1)
		ac.acct, ac.seen = newAccounting(), map[string]bool{}
	})
}

// Leading tells whether this replica accounts now.
func (ac *Accountant) Leading() bool { return ac.leading.Load() }

// Observe takes the state of an object from now on (cache.Observer).
func (ac *Accountant) Observe(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary) {
	if !ac.leading.Load() {
		return
	}
	ac.init()
	ac.mu.Lock()
	defer ac.mu.Unlock()
	ac.watchedLocked(string(o.GetUID()))
	ac.observeLocked(k, o, s, time.Now().UTC())
}

// Requested takes a cluster's requests anew, as the watch cache values them now (cache.RequestsObserver):
// a claim allocated after its version was observed is credited from now on.
func (ac *Accountant) Requested(uid types.UID, r ray.Resources) {
	if !ac.leading.Load() {
		return
	}
	ac.init()
	ac.mu.Lock()
	defer ac.mu.Unlock()
	ac.requestedLocked(uid, r, time.Now().UTC())
}

func (ac *Accountant) requestedLocked(uid types.UID, r ray.Resources, now time.Time) {
	a := &ac.acct
	m := a.marks[string(uid)]
	if m == nil || m.Gone {
		return
	}
	base := m.State
	if c, ok := a.claims[string(uid)]; ok {
		c.base.Requests = r
		a.claims[string(uid)] = c
		base = c.base
	} else {
		base.Requests = r
	}
	ac.changeLocked(m, a.stateOf(string(uid), base, m), now)
}

// watchedLocked notes that the watch told of uid while this replica lists every object.
func (ac *Accountant) watchedLocked(uid string) {
	if ac.watched != nil && uid != "" {
		ac.watched[uid] = true
	}
}

func (ac *Accountant) observeLocked(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary, now time.Time) {
	uid := string(o.GetUID())
	if uid == "" {
		return
	}
	ac.seen[uid] = true
	ac.accountLocked(k, o, s, now)
}

// Gone ends the credit of an object deleted (cache.Observer).
func (ac *Accountant) Gone(k *ray.Kind, e *cache.Entry, _ []corev1.Pod) {
	if !ac.leading.Load() {
		return
	}
	ac.init()
	ac.mu.Lock()
	defer ac.mu.Unlock()
	ac.goneLocked(k, e, time.Now().UTC())
}

func (ac *Accountant) goneLocked(k *ray.Kind, e *cache.Entry, now time.Time) {
	uid := string(e.UID)
	if uid == "" || e.Summary() == nil {
		return
	}
	ac.endLocked(k, uid, e.Namespace, e.Name, now)
}

// endLocked ends the credit of the object uid, ns/name of k, deleted at now.
func (ac *Accountant) endLocked(k *ray.Kind, uid, ns, name string, now time.Time) {
	delete(ac.seen, uid)
	ac.watchedLocked(uid)
	ac.goneAccountLocked(uid, now)
	ac.goneMakerLocked([3]string{k.Kind, ns, name}, now)
}

// Start runs the accounting's loops (they act while this replica holds the Lease) until ctx ends.
func (ac *Accountant) Start(ctx context.Context) {
	ac.init()
	go ac.write(ctx)
	go ac.account(ctx)
}

// Hooks are the accountant's part in the service's Lease: it accounts while this replica holds it.
func (ac *Accountant) Hooks() lease.Hooks {
	return lease.Hooks{Name: "utilization", Lead: ac.lead, Follow: ac.follow}
}

// lead takes the accounting up from the marks of the objects not gone, as the last holder left them,
// and compares them with every object there now.
func (ac *Accountant) lead(ctx context.Context) {
	ac.init()
	var marks map[string]*Mark
	if wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if marks, err = ac.Store.UsageMarks(ctx); err != nil {
			ac.Log.Warn("utilization: reading the marks", zap.Error(err))
		}
		return err == nil, nil
	}) != nil {
		return // the lead ended first
	}
	ac.mu.Lock()
	ac.leadAccounting(marks)
	ac.watched = map[string]bool{}
	ac.mu.Unlock()
	defer func() {
		ac.mu.Lock()
		ac.watched = nil
		ac.mu.Unlock()
	}()
	ac.leading.Store(true)
	ac.Log.Info("utilization: this replica credits the Ray clusters")
	if err := cache.CatchUp(ctx, ac.Dynamic, ac.Kinds, ac.Serves, ac.Signer, ac.observe); err != nil {
		if ctx.Err() == nil {
			ac.Log.Error("utilization: listing to catch up", zap.Error(err))
		}
		return
	}
	ac.mu.Lock()
	ac.caughtUpAccountingLocked()
	ac.mu.Unlock()
}

// observe observes an object listed to catch up, unless the watch told of it (a change or its
// deletion) since the listing began: its state is newer than the page's.
func (ac *Accountant) observe(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary, now time.Time) {
	if ac.Value != nil {
		s = ac.Value(s)
	}
	ac.mu.Lock()
	defer ac.mu.Unlock()
	if !ac.watched[string(o.GetUID())] {
		ac.observeLocked(k, o, s, now)
	}
}

// follow stops accounting: another replica does now, or this one stops.
func (ac *Accountant) follow() {
	ac.leading.Store(false)
	ac.mu.Lock()
	ac.acct, ac.seen = newAccounting(), map[string]bool{}
	ac.mu.Unlock()
	ac.Log.Info("utilization: this replica no longer credits the Ray clusters")
}

// write writes the credits gathered as they come; what fails is tried again a second later.
func (ac *Accountant) write(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ac.wake:
		}
		if !ac.leading.Load() || ac.writeAccounting(ctx) {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		ac.mu.Lock()
		ac.wakeLocked()
		ac.mu.Unlock()
	}
}
