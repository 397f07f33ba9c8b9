package poolmgr

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// PodClient is what the pod source needs of the API server: pods of one
// namespace. client-go's typed Pods(namespace) client satisfies it, which
// is how the tests drive the fake clientset.
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// LeaseClient is what the Lease lock needs of the API server: Leases of
// one namespace. client-go's typed Leases(namespace) client satisfies it.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// KubeAPI talks to the API server about the two kinds edge uses, pods and
// Leases, through client-go's REST client and a scheme of only core/v1 and
// coordination/v1. client-go's generated clientset registers every API
// group's types at start: it made edge's binary 51 MB larger and its idle
// RSS 18 MB larger, for two resources (docs/benchmarks.md).
type KubeAPI struct {
	core, coordination rest.Interface
}

// NewKubeClient connects with kubeconfig, or in-cluster when it is "".
func NewKubeClient(kubeconfig string) (*KubeAPI, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	cfg.UserAgent = "edge"
	return NewKubeAPI(cfg)
}

// kubeScheme holds the types edge decodes: core/v1 (pods, and the Status
// of an error) and coordination/v1 (Leases), plus the unversioned meta
// types every group's watch and error replies use.
var kubeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // static registrations: a failure is a build defect
		}
	}
	return s
}()

// NewKubeAPI builds the two REST clients from cfg.
func NewKubeAPI(cfg *rest.Config) (*KubeAPI, error) {
	codecs := rest.CodecFactoryForGeneratedClient(kubeScheme, serializer.NewCodecFactory(kubeScheme)).WithoutConversion()
	client := func(apiPath string, gv schema.GroupVersion) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.APIPath, c.GroupVersion, c.NegotiatedSerializer = apiPath, &gv, codecs
		if c.UserAgent == "" {
			c.UserAgent = "edge"
		}
		rc, err := rest.RESTClientFor(c)
		if err != nil {
			return nil, fmt.Errorf("kubernetes %s client: %w", gv, err)
		}
		return rc, nil
	}
	core, err := client("/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	coordination, err := client("/apis", coordinationv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &KubeAPI{core: core, coordination: coordination}, nil
}

// Pods is the pods of namespace.
func (k *KubeAPI) Pods(namespace string) PodClient {
	return restPods{c: k.core, ns: namespace}
}

// Leases is the Leases of namespace.
func (k *KubeAPI) Leases(namespace string) LeaseClient {
	return restLeases{c: k.coordination, ns: namespace}
}

type restPods struct {
	c  rest.Interface
	ns string
}

func (p restPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := p.c.Get().Namespace(p.ns).Resource("pods").
		VersionedParams(&opts, metav1.ParameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (p restPods) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return p.c.Get().Namespace(p.ns).Resource("pods").
		VersionedParams(&opts, metav1.ParameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

type restLeases struct {
	c  rest.Interface
	ns string
}

func (l restLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.c.Get().Namespace(l.ns).Resource("leases").Name(name).
		VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (l restLeases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.c.Post().Namespace(l.ns).Resource("leases").
		VersionedParams(&opts, metav1.ParameterCodec).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (l restLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.c.Put().Namespace(l.ns).Resource("leases").Name(lease.Name).
		VersionedParams(&opts, metav1.ParameterCodec).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (l restLeases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return l.c.Get().Namespace(l.ns).Resource("leases").
		VersionedParams(&opts, metav1.ParameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

// timeout is the request timeout a list or watch asked for (0: none), as
// client-go's typed clients set it.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
