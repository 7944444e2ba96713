package k8s

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"ray-service/internal/ray"
)

// ReadEnding reads, with the clients given (the service's own), what explains how an object of kind
// k ended: ns/name, running on the Ray clusters named (the current one first). The pods of those
// clusters are listed, unless some are given (known): an object deleted has them from the watch cache,
// as they were when it went. None given (the cache saw the pods' deletions first), they are listed: the
// garbage collector may not have deleted them yet. What cannot be read (the pods are gone, a log was never written) is left
// out; only a failure to reach the apiserver is an error.
func ReadEnding(ctx context.Context, core kubernetes.Interface, k *ray.Kind, ns, name string, clusters []string, known []corev1.Pod,
	lim ray.EndingLimits) (*ray.Ending, error) {
	pods := append([]corev1.Pod(nil), known...)
	listed := clusters
	if len(known) > 0 {
		listed = nil // the clusters' pods are known: only a submitter's are listed
	}
	selectors := k.PodSelectors(name, listed)
	// What the service may not read (its role lacks it) is left out; what fails otherwise is an error,
	// and the ending is read again later.
	for _, sel := range selectors {
		list, err := core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		switch {
		case apierrors.IsForbidden(err):
		case apierrors.IsBadRequest(err):
			// A selector the apiserver refuses is refused whenever it is asked: the ending is written
			// without those pods, rather than read again every second while every record waits behind
			// it (PodSelectors leaves out the names it knows no pod carries).
		case err != nil:
			return nil, err
		default:
			pods = append(pods, list.Items...)
		}
	}
	ray.SortPods(pods)
	events := &corev1.EventList{}
	if list, err := core.CoreV1().Events(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"}); err == nil {
		events = list
	} else if !apierrors.IsForbidden(err) {
		return nil, err
	}
	names := make([]string, len(pods))
	for i := range pods {
		names[i] = pods[i].Name
	}
	e := &ray.Ending{Events: k.EventsOf(name, clusters, names, events.Items), Pods: make([]ray.PodEnd, 0, len(pods))}
	if len(e.Events) > lim.Events {
		e.Events = e.Events[:lim.Events]
	}
	for i := range pods {
		e.Pods = append(e.Pods, ray.PodEndOf(&pods[i]))
	}
	current := ""
	if len(clusters) > 0 {
		current = clusters[0]
	}
	if target, container, err := k.LogTargetOn(current, pods, "", ""); err == nil {
		tail, err := readTail(ctx, core, target, container, lim)
		var status apierrors.APIStatus
		switch {
		case err == nil:
			e.Log = tail
		case errors.As(err, &status):
			// A pod gone, a log never written or not to be read: no tail.
		case ctx.Err() != nil:
			return nil, ctx.Err()
		default:
			// The rest of the ending is kept without it, rather than read again and again.
			e.LogOmitted = "the log tail could not be read: " + err.Error()
		}
	}
	return e, nil
}

// errTailTooLong says that the last lines of a log are longer than what is read of them.
var errTailTooLong = errors.New("its last lines are too long")

// readTail reads the last lines of a container's log, within the limits: at most 4 times LogBytes is
// read, within LogTimeout. Last lines longer than that are read again, fewer of them.
func readTail(ctx context.Context, core kubernetes.Interface, p *corev1.Pod, container string, lim ray.EndingLimits) (*ray.LogTail, error) {
	timeout := lim.LogTimeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for lines := lim.LogLines; lines > 0; lines /= 8 {
		tail, err := readTailLines(ctx, core, p, container, lines, lim)
		if errors.Is(err, errTailTooLong) {
			continue
		}
		if err != nil && ctx.Err() != nil && !errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("not within %s", timeout)
		}
		if tail != nil && lines < lim.LogLines {
			tail.Truncated = true
		}
		return tail, err
	}
	return nil, fmt.Errorf("its last lines are longer than %d KiB", 4*lim.LogBytes>>10)
}

// readTailLines reads the last lines of a container's log, and keeps at most LogBytes of them.
func readTailLines(ctx context.Context, core kubernetes.Interface, p *corev1.Pod, container string, lines int64, lim ray.EndingLimits) (*ray.LogTail, error) {
	asked := lines + 1 // one more tells whether there was more
	stream, err := core.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, TailLines: &asked}).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.Close() }()
	readMax := 4 * lim.LogBytes
	// The tail of a log of long lines may be larger than the bound: read up to 4 times it, keep the end.
	var kept []byte
	buf := make([]byte, 32<<10)
	truncated, read := false, int64(0)
	limited := io.LimitReader(stream, readMax+1)
	for {
		n, err := limited.Read(buf)
		read += int64(n)
		if read > readMax {
			return nil, errTailTooLong
		}
		kept = append(kept, buf[:n]...)
		if over := int64(len(kept)) - lim.LogBytes; over > 0 {
			kept, truncated = kept[over:], true
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	text := string(kept)
	if truncated {
		// Start at a whole line.
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
	}
	if n := int64(strings.Count(strings.TrimSuffix(text, "\n"), "\n") + 1); text != "" && n > lines {
		truncated = true
		text = text[strings.IndexByte(text, '\n')+1:]
	}
	return &ray.LogTail{Pod: p.Name, Container: container, Text: strings.ToValidUTF8(text, "\uFFFD"), Truncated: truncated}, nil
}
