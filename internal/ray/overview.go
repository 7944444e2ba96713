package ray

// KindCount counts the objects of a kind: all of them (templates too), and those active (not Stopped,
// Succeeded or Failed).
type KindCount struct {
	Total  int `json:"total"`
	Active int `json:"active"`
}
