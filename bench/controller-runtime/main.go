// Command controller-runtime-driver is the controller-runtime side of kubeforge's benchmark: the
// same Bench workload as the kubeforge and kube-runtime drivers (see bench/README in the
// repository README's "Performance" section).
//
// Reconcile: read the Bench from the cache, server-side-apply a ConfigMap owned by it holding
// spec.value, then merge-patch status.observedValue.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var benchGVK = schema.GroupVersionKind{Group: "bench.kubeforge.dev", Version: "v1", Kind: "Bench"}

type reconciler struct {
	client client.Client
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(benchGVK)
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	value, _, _ := unstructured.NestedInt64(obj.Object, "spec", "value")
	controllerRef := true
	cm := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]interface{}{
			"name":      req.Name,
			"namespace": req.Namespace,
			"ownerReferences": []interface{}{map[string]interface{}{
				"apiVersion":         benchGVK.GroupVersion().String(),
				"kind":               benchGVK.Kind,
				"name":               obj.GetName(),
				"uid":                string(obj.GetUID()),
				"controller":         controllerRef,
				"blockOwnerDeletion": true,
			}},
		},
		"data": map[string]interface{}{"value": fmt.Sprint(value)},
	}}
	if err := r.client.Patch(ctx, cm, client.Apply, client.FieldOwner("bench-driver"), client.ForceOwnership); err != nil {
		return reconcile.Result{}, err
	}
	observed, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedValue")
	if !found || observed != value {
		patch := []byte(fmt.Sprintf(`{"status":{"observedValue":%d}}`, value))
		if err := r.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// podsReconciler is the pods-cached scenario's controller: it reconciles nothing.
type podsReconciler struct{}

func (podsReconciler) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}

// podView cuts a Pod down to the fields of the Rust drivers' PodView (metadata without
// managedFields, spec.nodeName, the containers' names and images, status.phase) before the
// informer stores it; anything else (a tombstone) passes unchanged.
func podView(in interface{}) (interface{}, error) {
	pod, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	out := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta}
	out.ManagedFields = nil
	out.Spec.NodeName = pod.Spec.NodeName
	out.Spec.Containers = make([]corev1.Container, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		out.Spec.Containers[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	out.Status.Phase = pod.Status.Phase
	return out, nil
}

func main() {
	// --kubeconfig is registered by controller-runtime itself (sigs.k8s.io/controller-runtime/pkg/client/config).
	namespace := flag.String("namespace", "", "namespace to watch")
	concurrency := flag.Int("concurrency", 4, "max concurrent reconciles")
	keepManagedFields := flag.Bool("keep-managed-fields", false, "keep managedFields in the cache")
	ownedMetadataOnly := flag.Bool("owned-metadata-only", false, "watch the owned ConfigMaps as metadata only")
	pods := flag.String("pods", "", "the pods-cached scenario: cache the namespace's Pods in full (full) or cut to the view's fields by a transform (view), with a controller that does nothing, instead of the Bench workload")
	flag.Parse()

	config, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	config.QPS = -1 // client-side rate limiting off
	config.Burst = -1

	cacheOptions := cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}}
	if !*keepManagedFields {
		cacheOptions.DefaultTransform = cache.TransformStripManagedFields()
	}
	switch *pods {
	case "", "full":
	case "view":
		cacheOptions.ByObject = map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: podView}}
	default:
		fmt.Fprintln(os.Stderr, "error: --pods takes full or view, not", *pods)
		os.Exit(2)
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Cache: cacheOptions,
		// Reads of unstructured objects bypass the cache unless asked: read the Bench from the
		// cache, like the other drivers (the audit log showed one GET per reconcile without it).
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:                server.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	if *pods != "" {
		cachePods(mgr, *concurrency)
		return
	}
	bench := &unstructured.Unstructured{}
	bench.SetGroupVersionKind(benchGVK)
	var ownedObject client.Object = &corev1.ConfigMap{}
	var ownedOptions []builder.OwnsOption
	if *ownedMetadataOnly {
		// The informer of an OnlyMetadata watch holds PartialObjectMetadata of the kind.
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		ownedObject = meta
		ownedOptions = append(ownedOptions, builder.OnlyMetadata)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("bench").
		For(bench).
		Owns(&corev1.ConfigMap{}, ownedOptions...).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: *concurrency,
			// The same per-key failure backoff as the other drivers: 5 ms .. 1000 s.
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 1000*time.Second),
		}).
		Complete(&reconciler{client: mgr.GetClient()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	start := time.Now()
	ctx := ctrl.SetupSignalHandler()
	go func() {
		// GetInformer returns the controller's shared informers once they have synced.
		if _, err := mgr.GetCache().GetInformer(ctx, bench); err != nil {
			return
		}
		if _, err := mgr.GetCache().GetInformer(ctx, ownedObject); err != nil {
			return
		}
		fmt.Printf("synced %.6f\n", time.Since(start).Seconds())
		reportHeap()
	}()
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// cachePods runs the pods-cached scenario: a controller of the namespace's Pods that does
// nothing; "synced" once the Pod informer has synced.
func cachePods(mgr ctrl.Manager, concurrency int) {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("pods").
		For(&corev1.Pod{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(podsReconciler{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	start := time.Now()
	ctx := ctrl.SetupSignalHandler()
	go func() {
		// GetInformer called before the cache has started returns the informer without waiting
		// for its sync: wait for HasSynced (polled every millisecond: the sync of a few
		// hundred Pods takes milliseconds, client-go's WaitForCacheSync polls every 100 ms).
		informer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return
		}
		for !informer.HasSynced() {
			time.Sleep(time.Millisecond)
		}
		fmt.Printf("synced %.6f\n", time.Since(start).Seconds())
		reportHeap()
	}()
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// reportHeap (BENCH_REPORT_HEAP, the memory scenarios only) prints the live heap after a
// collection every second, as the Rust drivers' counting allocator reports theirs.
func reportHeap() {
	if os.Getenv("BENCH_REPORT_HEAP") == "" {
		return
	}
	for {
		time.Sleep(time.Second)
		runtime.GC()
		var stats runtime.MemStats
		runtime.ReadMemStats(&stats)
		fmt.Printf("heap %d\n", stats.HeapAlloc)
	}
}
