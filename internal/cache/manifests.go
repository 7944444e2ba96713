package cache

import (
	"container/list"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray"
)

// Bounds of the manifests kept for details: at most this many objects, and about this many bytes of
// them (estimated as their JSON, twice: the object and its encoding, made at its first detail). The
// least recently shown go first.
const (
	maxManifests      = 1024
	maxManifestsBytes = 32 << 20
)

// manifests keeps the whole manifests (without managedFields) of the Ray objects recently shown in
// detail, so that the next detail of one reads it from the cache: an object is tracked from its first
// detail, and each version its informer receives replaces the one kept. What is kept is only ever
// shown for the version the cache has published (see Store.Manifest).
type manifests struct {
	mu sync.Mutex
	// writes counts the writes made through the service (see Store.ForgetManifest).
	writes uint64
	bytes  int
	byKey  map[manifestKey]*list.Element
	lru    *list.List // of *keptManifest, most recently shown first
}

type manifestKey struct {
	k        *ray.Kind
	ns, name string
}

type keptManifest struct {
	key manifestKey
	// obj is the newest version received since the object was tracked; nil until one is. prev is the
	// one before it: the informer transforms a version (and observe keeps it) before its store holds
	// it, and until then the store still publishes prev.
	obj, prev *Manifest
	size      int
}

// Manifest is one version of an object's manifest kept for details, without managedFields; it is
// the cache's own and not to be changed. Its JSON is made at the first detail that shows the version
// and shared by every detail after.
type Manifest struct {
	*unstructured.Unstructured
	once    sync.Once
	encoded []byte
	err     error
}

// JSON is the manifest encoded as JSON, made once.
func (m *Manifest) JSON() ([]byte, error) {
	m.once.Do(func() { m.encoded, m.err = json.Marshal(m.Object) })
	return m.encoded, m.err
}

func newManifests() *manifests {
	return &manifests{byKey: map[manifestKey]*list.Element{}, lru: list.New()}
}

// observe keeps u, a version of a tracked object the informer received, in place of the one kept. u is
// the cache's own (the informer drops it once trimmed): it is kept as it is, not copied. A store made
// without manifests (a zero Store in tests) keeps none.
func (m *manifests) observe(k *ray.Kind, u *unstructured.Unstructured) {
	if m == nil {
		return
	}
	key := manifestKey{k, u.GetNamespace(), u.GetName()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.byKey[key]; ok {
		kept := el.Value.(*keptManifest)
		m.setLocked(kept, u, kept.obj)
	}
}

// setLocked keeps u as the newest version, and prev as the one before it.
func (m *manifests) setLocked(kept *keptManifest, u *unstructured.Unstructured, prev *Manifest) {
	u.SetManagedFields(nil)
	size := 2 * jsonSize(u.Object)
	if prev != nil {
		size += 2 * jsonSize(prev.Object)
	}
	m.bytes += size - kept.size
	kept.obj, kept.prev, kept.size = &Manifest{Unstructured: u}, prev, size
	m.trimLocked()
}

// track starts keeping the object's versions, with u (copied) as the version known now, unless a write
// was made through the service since the count of writes was `writes`: u may be older than that write.
func (m *manifests) track(k *ray.Kind, u *unstructured.Unstructured, writes uint64) {
	key := manifestKey{k, u.GetNamespace(), u.GetName()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.writes != writes {
		return
	}
	el, ok := m.byKey[key]
	if !ok {
		el = m.lru.PushFront(&keptManifest{key: key})
		m.byKey[key] = el
	}
	m.lru.MoveToFront(el)
	// A read replaces what was kept: it may be older than the informer's versions, and is then not
	// served until the informer's next version.
	m.setLocked(el.Value.(*keptManifest), u.DeepCopy(), nil)
}

// get returns the manifest kept of the object at resource version rv, and marks it as just shown.
func (m *manifests) get(k *ray.Kind, ns, name, rv string) (*Manifest, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byKey[manifestKey{k, ns, name}]
	if !ok {
		return nil, false
	}
	m.lru.MoveToFront(el)
	kept := el.Value.(*keptManifest)
	for _, v := range []*Manifest{kept.obj, kept.prev} {
		if v != nil && v.GetResourceVersion() == rv {
			return v, true
		}
	}
	return nil, false
}

// forget stops keeping an object, deleted or written; written counts a write.
func (m *manifests) forget(k *ray.Kind, ns, name string, written bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if written {
		m.writes++
	}
	if el, ok := m.byKey[manifestKey{k, ns, name}]; ok {
		m.removeLocked(el)
	}
}

func (m *manifests) removeLocked(el *list.Element) {
	kept := m.lru.Remove(el).(*keptManifest)
	delete(m.byKey, kept.key)
	m.bytes -= kept.size
}

// trimLocked drops the least recently shown until the bounds hold.
func (m *manifests) trimLocked() {
	for m.lru.Len() > 0 && (m.lru.Len() > maxManifests || m.bytes > maxManifestsBytes) {
		m.removeLocked(m.lru.Back())
	}
}

// jsonSize estimates the bytes of v encoded as JSON, as a measure of the memory it holds.
func jsonSize(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := 2
		for k, e := range v {
			n += len(k) + 4 + jsonSize(e)
		}
		return n
	case []any:
		n := 2
		for _, e := range v {
			n += 1 + jsonSize(e)
		}
		return n
	case string:
		return len(v) + 2
	default:
		return 8
	}
}

// Manifest returns the whole manifest of the instance ns/name of k, without managedFields, as the cache
// holds it now, when it keeps it: from the object's second detail on, until it is deleted or others
// are shown more recently (see maxManifests). It is shared: callers must not change it.
func (s *Store) Manifest(k *ray.Kind, ns, name string) (*Manifest, bool) {
	rv, ok := s.entryVersion(k, ns, name)
	if !ok {
		return nil, false
	}
	return s.manifests.get(k, ns, name, rv)
}

// ManifestWrites counts the writes made through the service so far: read it before reading an object
// from the apiserver for KeepManifest.
func (s *Store) ManifestWrites() uint64 {
	s.manifests.mu.Lock()
	defer s.manifests.mu.Unlock()
	return s.manifests.writes
}

// KeepManifest tells the cache that u, an instance of k read from the apiserver for a detail after
// ManifestWrites said writes, is shown in detail: from now on the cache keeps its manifest and every
// newer version, and serves it (see Manifest) once its informer holds the same version. Nothing is kept
// when a write was made through the service in between (u may be older than what the writer was told).
func (s *Store) KeepManifest(k *ray.Kind, u *unstructured.Unstructured, writes uint64) {
	s.manifests.track(k, u, writes)
}

// ForgetManifest stops keeping the manifest of ns/name after a write through the service, so that the
// next detail reads what was written from the apiserver, whatever the informer has received.
func (s *Store) ForgetManifest(k *ray.Kind, ns, name string) {
	s.manifests.forget(k, ns, name, true)
}

// entryVersion is the resource version of the entry the informer of k holds of ns/name.
func (s *Store) entryVersion(k *ray.Kind, ns, name string) (string, bool) {
	e := s.entry(k, ns, name)
	if e == nil {
		return "", false
	}
	return e.ResourceVersion, true
}

// entry is the entry the informer of k holds of ns/name, nil without one.
func (s *Store) entry(k *ray.Kind, ns, name string) *Entry {
	inf := s.informers[k]
	if inf == nil {
		return nil
	}
	o, _, _ := inf.GetIndexer().GetByKey(ns + "/" + name)
	e, _ := o.(*Entry)
	return e
}
