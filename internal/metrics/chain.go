package metrics

import "github.com/prometheus/client_golang/prometheus"

// Chain says what the last walk of the audit trail's chain found: nothing yet (known false), or
// whether it was intact and how many entries it checked.
type Chain func() (known, intact bool, entries int64)

type chainCollector struct {
	last            Chain
	intact, entries *prometheus.Desc
}

// NewChainCollector exposes the last verdict of the audit trail's periodic walk: none before the first.
func NewChainCollector(last Chain) prometheus.Collector {
	return &chainCollector{last: last,
		intact: prometheus.NewDesc("ray_service_audit_chain_intact",
			"1 when the last walk of the audit trail's chain found every entry as appended, none missing and none added; 0 when it found the chain broken (the log says where).", nil, nil),
		entries: prometheus.NewDesc("ray_service_audit_chain_entries",
			"The entries the last walk of the audit trail's chain checked.", nil, nil),
	}
}

func (c *chainCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.intact
	ch <- c.entries
}

func (c *chainCollector) Collect(ch chan<- prometheus.Metric) {
	known, intact, entries := c.last()
	if !known {
		return
	}
	v := 0.0
	if intact {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(c.intact, prometheus.GaugeValue, v)
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(entries))
}
