package cache

import (
	"ray-service/internal/auth"
)

// Scopes are where a caller may see the instances and the templates of a kind: the one scope a list,
// a stream, a count and the overview read the cache with.
type Scopes struct {
	Instances, Templates auth.Scope
}

func (sc Scopes) equal(o Scopes) bool {
	return sc.Instances.Equal(o.Instances) && sc.Templates.Equal(o.Templates)
}

// visible is what a list in scopes shows of a name: its instance when it has one (if the instance scope
// holds it), else its template (if the template scope holds it). See Items.
func (sc Scopes) visible(ns string, instance, template *Item) *Item {
	switch {
	case instance != nil && sc.Instances.Contains(ns):
		return instance
	case instance == nil && template != nil && sc.Templates.Contains(ns):
		return template
	}
	return nil
}
