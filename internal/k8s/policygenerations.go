package k8s

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
)

// PolicyGenerations keeps, for each namespace, the UID of its idle policy's ConfigMap and the generation
// the service last gave it, in a ConfigMap of the service's own namespace that the namespaces' users
// cannot write (data: namespace → "uid/generation"). A policy's signature covers both, so that a copy
// (another UID) and an older version written back (an older generation) are refused. It is written with
// the service's own identity; the chart makes the ConfigMap, and the service makes it where it is not
// there (a local run). Lost, it refuses every policy until each is set again: no cluster is stopped.
type PolicyGenerations struct {
	ConfigMaps corev1client.ConfigMapInterface
	Name       string
}

// Last is the UID and generation the service last wrote for ns ("" and 0: none).
func (g *PolicyGenerations) Last(ctx context.Context, ns string) (uid string, generation int64, err error) {
	cm, err := g.ConfigMaps.Get(ctx, g.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("reading the idle policies' generations: %w", err)
	}
	uid, generation = parseGeneration(cm.Data[ns])
	return uid, generation, nil
}

func parseGeneration(v string) (string, int64) {
	uid, gen, ok := strings.Cut(v, "/")
	n, err := strconv.ParseInt(gen, 10, 64)
	if !ok || err != nil {
		return "", 0
	}
	return uid, n
}

// Next gives the ConfigMap uid of ns's policy its next generation, kept before it is returned: the
// generation after the last of any ConfigMap of ns, so that none is given twice.
func (g *PolicyGenerations) Next(ctx context.Context, ns string, uid types.UID) (int64, error) {
	var next int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := g.ConfigMaps.Get(ctx, g.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			next = 1
			_, err = g.ConfigMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: g.Name},
				Data: map[string]string{ns: string(uid) + "/1"}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(configMaps, g.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		_, last := parseGeneration(cm.Data[ns])
		next = last + 1
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[ns] = string(uid) + "/" + strconv.FormatInt(next, 10)
		_, err = g.ConfigMaps.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("keeping the idle policy's generation: %w", err)
	}
	return next, nil
}

// Forget drops what is kept of ns's policy (it was deleted); the generation given last is kept, so
// that no later one repeats it.
func (g *PolicyGenerations) Forget(ctx context.Context, ns string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := g.ConfigMaps.Get(ctx, g.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		_, last := parseGeneration(cm.Data[ns])
		if last == 0 {
			return nil
		}
		cm.Data[ns] = "/" + strconv.FormatInt(last, 10)
		_, err = g.ConfigMaps.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}
