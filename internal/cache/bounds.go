package cache

import (
	"unsafe"

	"ray-service/internal/ray"
)

// Sizes the feed counts an item by, besides what its summary holds (ray.Summary.Bytes).
const (
	itemOverhead     = int(unsafe.Sizeof(Item{}))
	labelOverhead    = int(unsafe.Sizeof(ray.LabelPair{}))
	allocationsSlack = 64
)

// itemBytes estimates the memory an item holds.
func itemBytes(it *Item) int {
	if it == nil {
		return 0
	}
	n := itemOverhead + allocationsSlack + len(it.lowerName) + it.Summary.Bytes()
	for _, l := range it.Labels {
		n += labelOverhead + len(l.Key) + len(l.Value)
	}
	return n
}
