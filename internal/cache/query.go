package cache

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// Sort keys of a list.
const (
	SortByName       = "name"
	SortByCreatedAt  = "createdAt"
	SortByStatus     = "status"
	SortByRayVersion = "rayVersion"
)

// Query selects, orders and pages summaries.
type Query struct {
	// Search is a case-insensitive substring of the name.
	Search string
	// Statuses, RayVersions and Creators each match any of their values; empty matches all.
	Statuses    []string
	RayVersions []string
	Creators    []string
	// Healths match the health state (Healthy, Progressing, Degraded, Failed, Stopped).
	Healths []string
	// LastOutcomes match, of a kind that makes runs, the status of the newest run that ended
	// (Succeeded, Failed) or ray.OutcomeNone; an item of another kind matches none of them.
	LastOutcomes []string
	// Idle, when set, matches the objects whose Ray cluster is idle (true) or is not (false).
	Idle *bool
	// Type is TypeInstance, TypeTemplate or "" for both.
	Type string
	// Labels selects by label; nil selects all.
	Labels labels.Selector
	// SortBy is one of the SortBy* keys; Desc reverses the order. Ties are ordered by namespace and name.
	SortBy string
	Desc   bool
	// Page counts from 1.
	Page, PageSize int
}

// filters tells whether the query leaves out any instance.
func (q *Query) filters() bool {
	return q.Search != "" || len(q.Statuses) > 0 || len(q.RayVersions) > 0 || len(q.Creators) > 0 || len(q.Healths) > 0 ||
		len(q.LastOutcomes) > 0 || q.Idle != nil || (q.Type != "" && q.Type != ray.TypeInstance) || (q.Labels != nil && !q.Labels.Empty())
}

// matchKey identifies what a filtering query matches in a scope, in the order of sortKey: every field
// but the page.
func (q *Query) matchKey(sortKey string, scope auth.Scope) string {
	where := "*"
	if !scope.IsAll() {
		where = strings.Join(scope.List(), ",")
	}
	sel := ""
	if q.Labels != nil {
		sel = q.Labels.String()
	}
	idle := ""
	if q.Idle != nil {
		idle = strconv.FormatBool(*q.Idle)
	}
	return strings.Join([]string{sortKey, strconv.FormatBool(q.Desc), strings.ToLower(q.Search), strings.Join(q.Statuses, ","),
		strings.Join(q.RayVersions, ","), strings.Join(q.Creators, ","), strings.Join(q.Healths, ","),
		strings.Join(q.LastOutcomes, ","), idle, q.Type, sel, where}, "\x00")
}

// Matches tells whether an item passes the query's filters.
func (q *Query) Matches(it *Item) bool { return q.matches(it, strings.ToLower(q.Search)) }

func (q *Query) matches(it *Item, search string) bool {
	s := &it.Summary
	name := it.lowerName
	if name == "" {
		name = strings.ToLower(s.Name)
	}
	return anyOf(q.Statuses, s.Status) && anyOf(q.RayVersions, s.RayVersion) && anyOf(q.Healths, s.Health.State) &&
		(len(q.LastOutcomes) == 0 || slices.Contains(q.LastOutcomes, s.LastOutcome())) && (q.Type == "" || s.Type == q.Type) &&
		(q.Idle == nil || *q.Idle == (s.Idle != nil)) &&
		(search == "" || strings.Contains(name, search)) &&
		(anyOf(q.Creators, s.Creator) || anyOf(q.Creators, it.Labels.Get(ray.CreatorKey))) &&
		(q.Labels == nil || q.Labels.Matches(it.Labels))
}

// Apply returns the items of the page Query asks for, and how many items match in all. The items are
// shared, not changed.
func (q *Query) Apply(items []*Item) (page []*Item, total int) {
	matched := q.Select(items)
	total = len(matched)
	start := min((q.Page-1)*q.PageSize, total)
	end := min(start+q.PageSize, total)
	return append(make([]*Item, 0, end-start), matched[start:end]...), total
}

// Select returns the items that pass the query's filters, in its order, without copying them.
func (q *Query) Select(items []*Item) []*Item {
	search := strings.ToLower(q.Search)
	matched := slices.DeleteFunc(slices.Clone(items), func(it *Item) bool { return !q.matches(it, search) })
	slices.SortFunc(matched, order(q.SortBy, q.Desc))
	return matched
}

// order is the one order of the items of a list: by the sort key, descending if desc; ties by
// namespace, name and type, ascending either way. A total order over the items of a kind. The kept
// views (views.go) hold each key's ascending order and walk it backwards a run of equal keys at a time
// for the descending one, which is this order too.
func order(key string, desc bool) func(a, b *Item) int {
	byKey := lessFunc(key)
	return func(x, y *Item) int {
		a, b := &x.Summary, &y.Summary
		c := byKey(a, b)
		if desc {
			c = -c
		}
		return cmp.Or(c, strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.Type, b.Type))
	}
}

func anyOf(values []string, v string) bool {
	return len(values) == 0 || slices.Contains(values, v)
}

// lessFunc returns a three-way comparison for a sort key.
func lessFunc(key string) func(a, b *ray.Summary) int {
	switch key {
	case SortByName:
		return func(a, b *ray.Summary) int { return strings.Compare(a.Name, b.Name) }
	case SortByStatus:
		return func(a, b *ray.Summary) int { return strings.Compare(a.Status, b.Status) }
	case SortByRayVersion:
		return func(a, b *ray.Summary) int { return CompareVersions(a.RayVersion, b.RayVersion) }
	default:
		return func(a, b *ray.Summary) int { return a.CreatedAt.Compare(b.CreatedAt) }
	}
}

// CompareVersions orders version strings such as "2.9.0" and "2.10.1" by their numeric parts, so that
// 2.10 comes after 2.9; parts that are not numbers compare as text.
func CompareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y string
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		nx, ex := strconv.Atoi(x)
		ny, ey := strconv.Atoi(y)
		switch {
		case ex == nil && ey == nil:
			if nx != ny {
				if nx < ny {
					return -1
				}
				return 1
			}
		default:
			if c := strings.Compare(x, y); c != 0 {
				return c
			}
		}
	}
	return 0
}
