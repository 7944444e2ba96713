package usage

import (
	"bytes"
	"encoding/csv"
	"strconv"
)

// CSV is the report's rows as CSV, one line per row after a header: the group's fields, then the
// figures in hours (an empty cell where used was not measured or a ratio has nothing allocated).
func CSV(rep Report) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	head := groupColumns(rep.GroupBy)
	head = append(head, "heldHours", "cpuCoreHours", "memoryGiBHours", "gpuHours", "npuHours",
		"usedCpuCoreHours", "usedMemoryGiBHours", "usedGpuHours", "usedNpuHours",
		"cpuRatio", "memoryRatio", "gpuRatio", "npuRatio",
		"idleHours", "idleGpuHours", "idleNpuHours", "objects", "runs",
		"cpuShare", "memoryShare", "gpuShare", "npuShare")
	_ = w.Write(head)
	for _, r := range rep.Items {
		line := groupCells(rep.GroupBy, r.GroupKey)
		a := r.Allocated
		line = append(line, num(r.HeldHours), num(a.CPUCoreHours), num(a.MemoryGiBHours), num(a.GPUHours), num(a.NPUHours))
		if u := r.Used; u != nil {
			line = append(line, num(u.CPUCoreHours), num(u.MemoryGiBHours), num(u.GPUHours), num(u.NPUHours))
		} else {
			line = append(line, "", "", "", "")
		}
		line = append(line, opt(r.Ratio.CPU), opt(r.Ratio.Memory), opt(r.Ratio.GPU), opt(r.Ratio.NPU),
			num(r.Idle.Hours), num(r.Idle.GPUHours), num(r.Idle.NPUHours),
			strconv.FormatInt(r.Objects, 10), strconv.FormatInt(r.Runs, 10),
			num(r.Share.CPU), num(r.Share.Memory), num(r.Share.GPU), num(r.Share.NPU))
		_ = w.Write(line)
	}
	w.Flush()
	return b.Bytes()
}

func groupColumns(by string) []string {
	switch by {
	case ByCluster:
		return []string{"namespace", "cluster", "uid", "kind", "name", "creator"}
	default:
		return []string{by}
	}
}

func groupCells(by string, k GroupKey) []string {
	var cells []string
	switch by {
	case ByNamespace:
		cells = []string{k.Namespace}
	case ByCreator:
		cells = []string{k.Creator}
	case ByKind:
		cells = []string{k.Kind}
	default:
		cells = []string{k.Namespace, k.Cluster, k.UID, k.Kind, k.Name, k.Creator}
	}
	for i, c := range cells {
		cells[i] = cell(c)
	}
	return cells
}

// cell keeps a text a spreadsheet would take for a formula (one starting with =, +, -, @ or a control
// character) as text: a creator is whatever an annotation says.
func cell(s string) string {
	if s != "" && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r') {
		return "'" + s
	}
	return s
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func opt(f *float64) string {
	if f == nil {
		return ""
	}
	return num(*f)
}
