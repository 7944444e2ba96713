package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"ray-service/internal/access"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// listPage encodes a list's answer: the envelope of a Page[ray.Summary] with the items of the page, byte
// for byte what encoding the envelope would give. Each item's summary is encoded once by the cache
// (cache.Item.JSON) and shared by every page that shows it; a page adds what differs for its caller:
// the actions, the last field of a summary, and, where the caller may not be shown it, the health
// reason withheld (that item alone is encoded anew), and for a kind that completes its summaries at
// answer time (Kind.AtAnswer: a RayCronJob's next runs), its items encoded anew.
func listPage(k *ray.Kind, items []*cache.Item, granted map[string]ray.Permissions, total, page, pageSize int) (*response, error) {
	size := 128
	for _, it := range items {
		encoded, err := it.JSON()
		if err != nil {
			return nil, err
		}
		size += len(encoded) + 96 // and its actions
	}
	now := time.Now()
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(`{"code":200,"msg":"OK","data":{"items":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		actions, withheld := access.ShownAs(k, &it.Summary, granted[it.Summary.Namespace])
		encoded, err := it.JSON()
		if withheld || k.AtAnswer != nil {
			shown := it.Summary
			shown.Actions = nil
			if withheld {
				shown.Health = shown.Health.Withheld()
			}
			if k.AtAnswer != nil {
				k.AtAnswer(&shown, now)
			}
			encoded, err = json.Marshal(&shown)
		}
		if err != nil {
			return nil, err
		}
		b.Write(encoded[:len(encoded)-1]) // the summary without its closing brace
		b.WriteString(`,"actions":[`)
		for j, a := range actions {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('"')
			b.WriteString(a) // action names need no escape
			b.WriteByte('"')
		}
		b.WriteString("]}")
	}
	b.WriteString(`],"total":`)
	b.WriteString(strconv.Itoa(total))
	b.WriteString(`,"page":`)
	b.WriteString(strconv.Itoa(page))
	b.WriteString(`,"pageSize":`)
	b.WriteString(strconv.Itoa(pageSize))
	b.WriteString("}}\n")
	return &response{code: http.StatusOK, contentType: jsonContentType, body: b.Bytes()}, nil
}
