// kubecheck validates rendered Kubernetes manifests offline against the API
// types of a pinned Kubernetes version (k8s.io/api in go.mod): each document
// is decoded strictly (an unknown or misspelt field, a wrong type or a bad
// quantity is an error) into the Go type of its apiVersion and kind, and then
// checked for what the API server requires of the fields the chart uses:
// names that are DNS labels or subdomains, label syntax, selectors that match
// the pod template, containers with a name and an image, ports in range,
// probes with a handler, volume mounts that name a volume. ServiceMonitor is
// checked against the prometheus-operator types.
//
// kubeconform needs JSON schemas downloaded from the internet; this program
// needs nothing but the Go module cache, so it runs where the network does
// not reach.
//
//	kubecheck FILE...   (or - for stdin); prints one line per document, exits 1 on any error
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func newObject(h header) (any, error) {
	switch h.APIVersion + "/" + h.Kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/Secret":
		return &corev1.Secret{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q is not a kind kubecheck knows", h.APIVersion, h.Kind)
}

type checker struct{ errs []string }

func (c *checker) add(format string, a ...any) { c.errs = append(c.errs, fmt.Sprintf(format, a...)) }

func (c *checker) dnsLabel(what, v string) {
	for _, e := range validation.IsDNS1123Label(v) {
		c.add("%s %q: %s", what, v, e)
	}
}

func (c *checker) dnsSubdomain(what, v string) {
	for _, e := range validation.IsDNS1123Subdomain(v) {
		c.add("%s %q: %s", what, v, e)
	}
}

func (c *checker) meta(m metav1.ObjectMeta) {
	if m.Name == "" {
		c.add("metadata.name is required")
	}
	c.dnsSubdomain("metadata.name", m.Name)
	c.labelMap("metadata.labels", m.Labels)
}

func (c *checker) labelMap(what string, l map[string]string) {
	for k, v := range l {
		for _, e := range validation.IsQualifiedName(k) {
			c.add("%s key %q: %s", what, k, e)
		}
		for _, e := range validation.IsValidLabelValue(v) {
			c.add("%s %q value %q: %s", what, k, v, e)
		}
	}
}

func (c *checker) selector(what string, sel *metav1.LabelSelector, podLabels map[string]string) {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		c.add("%s.selector is required", what)
		return
	}
	c.labelMap(what+".selector.matchLabels", sel.MatchLabels)
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		c.add("%s.selector: %v", what, err)
		return
	}
	if podLabels != nil && !s.Matches(labels.Set(podLabels)) {
		c.add("%s.selector does not match the pod template's labels", what)
	}
}

func (c *checker) port(what string, p int32) {
	if p < 1 || p > 65535 {
		c.add("%s %d out of range", what, p)
	}
}

func (c *checker) probe(what string, p *corev1.Probe, ports map[string]bool) {
	if p == nil {
		return
	}
	n := 0
	if p.HTTPGet != nil {
		n++
		if p.HTTPGet.Port.Type == 1 && !ports[p.HTTPGet.Port.StrVal] {
			c.add("%s.httpGet.port %q names no container port", what, p.HTTPGet.Port.StrVal)
		}
		if !strings.HasPrefix(p.HTTPGet.Path, "/") {
			c.add("%s.httpGet.path must start with /", what)
		}
	}
	if p.TCPSocket != nil {
		n++
	}
	if p.Exec != nil {
		n++
	}
	if p.GRPC != nil {
		n++
	}
	if n != 1 {
		c.add("%s must have exactly one handler", what)
	}
}

func (c *checker) pod(what string, t corev1.PodTemplateSpec, claimNames map[string]bool) {
	c.labelMap(what+".metadata.labels", t.Labels)
	spec := t.Spec
	if len(spec.Containers) == 0 {
		c.add("%s.spec.containers: at least one container is required", what)
	}
	volumes := map[string]bool{}
	for n := range claimNames {
		volumes[n] = true
	}
	for _, v := range spec.Volumes {
		c.dnsLabel(what+".spec.volumes[].name", v.Name)
		if volumes[v.Name] {
			c.add("%s.spec.volumes: duplicate name %q", what, v.Name)
		}
		volumes[v.Name] = true
	}
	for _, ct := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		cw := fmt.Sprintf("%s container %q", what, ct.Name)
		c.dnsLabel(cw+" name", ct.Name)
		if ct.Image == "" {
			c.add("%s: image is required", cw)
		}
		ports := map[string]bool{}
		for _, p := range ct.Ports {
			c.port(cw+" containerPort", p.ContainerPort)
			if p.Name != "" {
				for _, e := range validation.IsValidPortName(p.Name) {
					c.add("%s port name %q: %s", cw, p.Name, e)
				}
				ports[p.Name] = true
			}
		}
		c.probe(cw+" readinessProbe", ct.ReadinessProbe, ports)
		c.probe(cw+" livenessProbe", ct.LivenessProbe, ports)
		c.probe(cw+" startupProbe", ct.StartupProbe, ports)
		for _, m := range ct.VolumeMounts {
			if !volumes[m.Name] {
				c.add("%s volumeMount %q names no volume", cw, m.Name)
			}
			if !strings.HasPrefix(m.MountPath, "/") {
				c.add("%s volumeMount %q: mountPath must be absolute", cw, m.Name)
			}
		}
		for _, e := range ct.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				c.add("%s env %q: %s", cw, e.Name, msg)
			}
		}
		for name, q := range ct.Resources.Requests {
			if l, ok := ct.Resources.Limits[name]; ok && q.Cmp(l) > 0 {
				c.add("%s: request of %s above its limit", cw, name)
			}
		}
	}
}

func (c *checker) check(obj any) string {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		c.meta(o.ObjectMeta)
		return o.Name
	case *corev1.Secret:
		c.meta(o.ObjectMeta)
		return o.Name
	case *corev1.ServiceAccount:
		c.meta(o.ObjectMeta)
		return o.Name
	case *corev1.Service:
		c.meta(o.ObjectMeta)
		c.dnsLabel("Service metadata.name", o.Name)
		if len(o.Spec.Ports) == 0 {
			c.add("spec.ports: at least one port is required")
		}
		for _, p := range o.Spec.Ports {
			c.port("spec.ports[].port", p.Port)
			if len(o.Spec.Ports) > 1 && p.Name == "" {
				c.add("spec.ports: every port needs a name when there are several")
			}
		}
		c.labelMap("spec.selector", o.Spec.Selector)
		return o.Name
	case *appsv1.StatefulSet:
		c.meta(o.ObjectMeta)
		claims := map[string]bool{}
		for _, t := range o.Spec.VolumeClaimTemplates {
			c.dnsLabel("volumeClaimTemplates[].metadata.name", t.Name)
			claims[t.Name] = true
			if _, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
				c.add("volumeClaimTemplate %q: resources.requests.storage is required", t.Name)
			}
		}
		if o.Spec.ServiceName == "" {
			c.add("spec.serviceName is required")
		}
		c.selector("spec", o.Spec.Selector, o.Spec.Template.Labels)
		c.pod("spec.template", o.Spec.Template, claims)
		return o.Name
	case *appsv1.Deployment:
		c.meta(o.ObjectMeta)
		c.selector("spec", o.Spec.Selector, o.Spec.Template.Labels)
		c.pod("spec.template", o.Spec.Template, nil)
		return o.Name
	case *policyv1.PodDisruptionBudget:
		c.meta(o.ObjectMeta)
		if (o.Spec.MinAvailable == nil) == (o.Spec.MaxUnavailable == nil) {
			c.add("spec: exactly one of minAvailable and maxUnavailable")
		}
		c.selector("spec", o.Spec.Selector, nil)
		return o.Name
	case *monitoringv1.ServiceMonitor:
		c.meta(o.ObjectMeta)
		if len(o.Spec.Endpoints) == 0 {
			c.add("spec.endpoints: at least one endpoint")
		}
		c.selector("spec", &o.Spec.Selector, nil)
		return o.Name
	}
	return "?"
}

func documents(r io.Reader) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	flush := func() {
		if len(bytes.TrimSpace(cur.Bytes())) > 0 {
			docs = append(docs, append([]byte{}, cur.Bytes()...))
		}
		cur.Reset()
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimRight(line, " ") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return docs, sc.Err()
}

// onlyComments says whether a document holds nothing but comments (helm
// template's "# Source:" lines of a template that rendered empty).
func onlyComments(doc []byte) bool {
	for _, l := range strings.Split(string(doc), "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: kubecheck FILE... (- for stdin)")
		os.Exit(2)
	}
	failed := false
	total := 0
	for _, f := range args {
		var r io.Reader = os.Stdin
		if f != "-" {
			fh, err := os.Open(f)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			defer fh.Close()
			r = fh
		}
		docs, err := documents(r)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for i, doc := range docs {
			if onlyComments(doc) {
				continue
			}
			total++
			var h header
			if err := yaml.Unmarshal(doc, &h); err != nil {
				fmt.Printf("FAIL %s doc %d: not YAML: %v\n", f, i, err)
				failed = true
				continue
			}
			obj, err := newObject(h)
			if err != nil {
				fmt.Printf("FAIL %s doc %d: %v\n", f, i, err)
				failed = true
				continue
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				fmt.Printf("FAIL %s %s doc %d: %v\n", f, h.Kind, i, err)
				failed = true
				continue
			}
			c := &checker{}
			name := c.check(obj)
			if len(c.errs) > 0 {
				failed = true
				for _, e := range c.errs {
					fmt.Printf("FAIL %s %s/%s: %s\n", f, h.Kind, name, e)
				}
				continue
			}
			fmt.Printf("ok %s/%s\n", h.Kind, name)
		}
	}
	if total == 0 {
		fmt.Println("FAIL no documents")
		failed = true
	}
	if failed {
		os.Exit(1)
	}
}
