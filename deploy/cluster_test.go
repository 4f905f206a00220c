package deploy

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// facts are what the rendered manifests must agree with.
type facts struct {
	routes   map[string]bool   // openapi.yaml's, as "GET /healthz"
	defaults map[string]string // the gateway's settings' defaults
	image    image             // what the Dockerfile makes
	secret   bool              // the rendering must carry the Secret with the key
}

// The gateway's stop, one duration after the other: the drain, the
// answers' way out, then the child's stdin and SIGTERM graces.
var stopBudget = []string{"GATEWAY_SHUTDOWN_GRACE", "GATEWAY_SHUTDOWN_TIMEOUT", "GATEWAY_STDIN_GRACE", "GATEWAY_TERM_GRACE"}

// graceMargin is what terminationGracePeriodSeconds must leave beyond the
// preStop sleep and the stop budget: the process's exit and tini's.
const graceMargin = 5 * time.Second

func objects[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// setting is an environment variable as the container sees it, and where
// it comes from.
type setting struct {
	value  string
	from   string // image, configmap NAME, env, secret or field
	secret string // the Secret's name, for a value from one
	key    string // and its key
}

// checker gathers the problems of one rendering.
type checker struct {
	objs     []runtime.Object
	f        facts
	problems []string
}

func (c *checker) bad(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// checkCluster returns what is wrong with a rendered set of manifests.
func checkCluster(objs []runtime.Object, f facts) []string {
	c := &checker{objs: objs, f: f}
	deps := objects[*appsv1.Deployment](objs)
	if len(deps) != 1 {
		c.bad("%d Deployments, want 1", len(deps))
		return c.problems
	}
	d := deps[0]
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "gateway" })
	if i < 0 {
		c.bad("Deployment %s has no container named gateway", d.Name)
		return c.problems
	}
	ctr := d.Spec.Template.Spec.Containers[i]
	pod := d.Spec.Template.Labels
	env := c.env(ctr)

	c.deployment(d, ctr, env)
	c.probes(ctr)
	c.grace(d, ctr, env)
	c.security(d, ctr)
	c.secret(ctr, env)
	c.auth(ctr, env)
	c.metrics(d, ctr, env)
	c.service(pod, ctr)
	c.autoscaler(d, ctr)
	c.disruptionBudget(pod)
	c.networkPolicy(pod, ctr)
	return c.problems
}

// env resolves the container's environment: the image's ENV, overridden
// by envFrom in order, overridden by env.
func (c *checker) env(ctr corev1.Container) map[string]setting {
	env := map[string]setting{}
	for k, v := range c.f.image.env {
		env[k] = setting{value: v, from: "image"}
	}
	for _, src := range ctr.EnvFrom {
		switch {
		case src.ConfigMapRef != nil:
			cm := c.configMap(src.ConfigMapRef.Name, src.ConfigMapRef.Optional)
			for k, v := range cm {
				env[src.Prefix+k] = setting{value: v, from: "configmap " + src.ConfigMapRef.Name}
			}
		case src.SecretRef != nil:
			for _, s := range c.secrets(src.SecretRef.Name) {
				for k := range s.Data {
					env[src.Prefix+k] = setting{from: "secret", secret: s.Name, key: k}
				}
			}
		}
	}
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = setting{value: e.Value, from: "env"}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			v, ok := c.configMap(ref.Name, ref.Optional)[ref.Key]
			if !ok && (ref.Optional == nil || !*ref.Optional) {
				c.bad("env %s: ConfigMap %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = setting{value: v, from: "configmap " + ref.Name}
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = setting{from: "secret", secret: e.ValueFrom.SecretKeyRef.Name, key: e.ValueFrom.SecretKeyRef.Key}
		default:
			env[e.Name] = setting{from: "field"}
		}
	}
	return env
}

func (c *checker) configMap(name string, optional *bool) map[string]string {
	for _, cm := range objects[*corev1.ConfigMap](c.objs) {
		if cm.Name == name {
			return cm.Data
		}
	}
	if optional == nil || !*optional {
		c.bad("the container reads ConfigMap %s, which is not in the rendering", name)
	}
	return nil
}

func (c *checker) secrets(name string) []*corev1.Secret {
	return slices.DeleteFunc(objects[*corev1.Secret](c.objs), func(s *corev1.Secret) bool { return s.Name != name })
}

// value is a setting's value, or the gateway's default when it is unset.
func (c *checker) value(env map[string]setting, name string) string {
	if s, ok := env[name]; ok {
		return s.value
	}
	return c.f.defaults[name]
}

func port(ctr corev1.Container, name string) (corev1.ContainerPort, bool) {
	i := slices.IndexFunc(ctr.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
	if i < 0 {
		return corev1.ContainerPort{}, false
	}
	return ctr.Ports[i], true
}

// targets says whether a port reference (a name or a number) is the
// container's port p.
func targets(ref intstr.IntOrString, p corev1.ContainerPort) bool {
	if ref.Type == intstr.String {
		return ref.StrVal == p.Name
	}
	return ref.IntVal == p.ContainerPort
}

func (c *checker) deployment(d *appsv1.Deployment, ctr corev1.Container, env map[string]setting) {
	// Unset, the autoscaler decides, from its minReplicas.
	if d.Spec.Replicas != nil && *d.Spec.Replicas < 2 {
		c.bad("Deployment %s: %d replicas, want 2 or more", d.Name, *d.Spec.Replicas)
	}
	if !selects(d.Spec.Selector, d.Spec.Template.Labels) {
		c.bad("Deployment %s: its selector does not match its pods' labels", d.Name)
	}
	http, ok := port(ctr, "http")
	if !ok || http.Protocol != corev1.ProtocolTCP {
		c.bad("the container has no TCP port named http")
	}
	host, p, err := splitAddr(c.value(env, "GATEWAY_ADDR"))
	switch {
	case err != nil:
		c.bad("GATEWAY_ADDR: %v", err)
	case !unspecified(host):
		c.bad("GATEWAY_ADDR=%s does not listen on every interface: the kubelet and the Service cannot reach it", c.value(env, "GATEWAY_ADDR"))
	case p != strconv.Itoa(int(http.ContainerPort)):
		c.bad("GATEWAY_ADDR=%s, but the http port is %d", c.value(env, "GATEWAY_ADDR"), http.ContainerPort)
	}
	req, lim := ctr.Resources.Requests, ctr.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
		c.bad("the container's resources: requests %v, limits %v; want cpu and memory requests and a memory limit", req, lim)
	}
	if spec := d.Spec.Template.Spec; spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		c.bad("enableServiceLinks is not false: a Service named gateway would set GATEWAY_SERVICE_HOST, GATEWAY_PORT and the like, in the gateway's namespace of variables")
	}
	if img := ctr.Image; img == "" || strings.HasSuffix(img, ":latest") || !strings.Contains(img, ":") && !strings.Contains(img, "@") {
		c.bad("image %q: want a tag or a digest, not latest", img)
	}
}

func (c *checker) probes(ctr corev1.Container) {
	http, _ := port(ctr, "http")
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{
		// Readiness follows the child and the drain; liveness only the
		// process, so that neither a child's restart nor a drain restarts
		// the pod.
		{"readiness", ctr.ReadinessProbe, "/readyz"},
		{"liveness", ctr.LivenessProbe, "/healthz"},
	} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			c.bad("no %s probe over HTTP", p.kind)
		case p.probe.HTTPGet.Path != p.path:
			c.bad("the %s probe asks %s, want %s", p.kind, p.probe.HTTPGet.Path, p.path)
		case !c.f.routes["GET "+p.probe.HTTPGet.Path]:
			c.bad("the %s probe asks GET %s, which openapi.yaml does not document", p.kind, p.probe.HTTPGet.Path)
		case !targets(p.probe.HTTPGet.Port, http):
			c.bad("the %s probe asks port %s, not the http port", p.kind, p.probe.HTTPGet.Port.String())
		}
	}
}

// grace checks that the pod's termination grace period covers the preStop
// sleep and the gateway's whole stop with the settings it runs with.
func (c *checker) grace(d *appsv1.Deployment, ctr corev1.Container, env map[string]setting) {
	var preStop time.Duration
	if l := ctr.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds <= 0 {
		c.bad("no preStop sleep: the drain would start while proxies still send new calls to the pod")
	} else {
		preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	}
	budget := preStop
	for _, name := range stopBudget {
		v := c.value(env, name)
		dur, err := time.ParseDuration(v)
		if err != nil {
			c.bad("%s=%q: %v", name, v, err)
		}
		budget += dur
	}
	tgps := time.Duration(corev1.DefaultTerminationGracePeriodSeconds) * time.Second
	if s := d.Spec.Template.Spec.TerminationGracePeriodSeconds; s != nil {
		tgps = time.Duration(*s) * time.Second
	}
	if tgps < budget+graceMargin {
		c.bad("terminationGracePeriodSeconds is %v, but the preStop sleep and the gateway's stop (%s) take up to %v, plus %v to spare",
			tgps, strings.Join(stopBudget, " + "), budget, graceMargin)
	}
}

func (c *checker) security(d *appsv1.Deployment, ctr corev1.Container) {
	pod := d.Spec.Template.Spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	sc := ctr.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	// The container's own settings win over the pod's.
	pick := func(ctr, pod *bool) bool {
		if ctr != nil {
			return *ctr
		}
		return pod != nil && *pod
	}
	uid := sc.RunAsUser
	if uid == nil {
		uid = pod.RunAsUser
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = pod.SeccompProfile
	}
	if !pick(sc.RunAsNonRoot, pod.RunAsNonRoot) {
		c.bad("runAsNonRoot is not true")
	}
	if uid == nil || *uid != c.f.image.uid {
		c.bad("runAsUser %v, want the image's USER %d", uid, c.f.image.uid)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		c.bad("allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		c.bad("the container is privileged")
	}
	if caps := sc.Capabilities; caps == nil || !slices.Contains(caps.Drop, "ALL") || len(caps.Add) > 0 {
		c.bad("capabilities %v: want ALL dropped and none added", caps)
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost {
		c.bad("seccompProfile %v, want RuntimeDefault", seccomp)
	}
	if d.Spec.Template.Spec.AutomountServiceAccountToken == nil || *d.Spec.Template.Spec.AutomountServiceAccountToken {
		c.bad("automountServiceAccountToken is not false: the gateway and its child need no API token")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		c.bad("readOnlyRootFilesystem is not true")
		return
	}
	// What stays writable: /tmp and HOME, on emptyDirs.
	for _, dir := range []string{"/tmp", c.f.image.env["HOME"]} {
		i := slices.IndexFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
		if i < 0 || ctr.VolumeMounts[i].ReadOnly || c.volume(d, ctr.VolumeMounts[i].Name).EmptyDir == nil {
			c.bad("%s is not a writable emptyDir under a read-only root filesystem", dir)
		}
	}
}

func (c *checker) volume(d *appsv1.Deployment, name string) corev1.VolumeSource {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v.VolumeSource
		}
	}
	c.bad("no volume %s", name)
	return corev1.VolumeSource{}
}

// secret checks that the key the replicas share comes from a Secret: as
// GATEWAY_SECRET from a secretKeyRef, or as GATEWAY_SECRET_FILE naming a
// key of a mounted Secret; and, when the rendering must carry it, that the
// Secret is there with that key.
func (c *checker) secret(ctr corev1.Container, env map[string]setting) {
	if s, ok := env["GATEWAY_SECRET"]; ok {
		if s.from != "secret" {
			c.bad("GATEWAY_SECRET comes from the %s, not from a Secret", s.from)
			return
		}
		c.secretKey("the key", s.secret, s.key)
	} else if s, ok := env["GATEWAY_SECRET_FILE"]; ok {
		if m, ok := c.secretFile(ctr, "GATEWAY_SECRET_FILE", s.value); ok {
			c.secretKey("the key", m.secret, m.key)
		}
	} else {
		c.bad("neither GATEWAY_SECRET nor GATEWAY_SECRET_FILE is set: each replica would sign with a key of its own, and a 2025 session would work on one replica only")
	}
}

// secretKey checks, when the rendering must carry its Secrets, that
// Secret name is there with key; what names what comes from it.
func (c *checker) secretKey(what, name, key string) {
	if !c.f.secret {
		return
	}
	secrets := c.secrets(name)
	if len(secrets) != 1 {
		c.bad("%s comes from Secret %s, which is not in the rendering", what, name)
		return
	}
	if len(secrets[0].Data[key]) == 0 && secrets[0].StringData[key] == "" {
		c.bad("Secret %s has no key %s", name, key)
	}
}

// secretMount is where a file on a Secret volume comes from.
type secretMount struct {
	secret, key string
	subPath     bool // mounted through a subPath, which the kubelet never updates
}

// secretFile finds the Secret and key mounted at file, which the setting
// variable names; it reports a file that is not on a mounted Secret.
func (c *checker) secretFile(ctr corev1.Container, variable, file string) (secretMount, bool) {
	d := objects[*appsv1.Deployment](c.objs)[0]
	for _, m := range ctr.VolumeMounts {
		// A directory holding the file, or the file itself (through a subPath).
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		switch {
		case file == m.MountPath:
			rel = ""
		case !ok:
			continue
		}
		src := c.volume(d, m.Name).Secret
		if src == nil {
			c.bad("%s=%s is on volume %s, which is not a Secret", variable, file, m.Name)
			return secretMount{}, false
		}
		key := path.Join(m.SubPath, rel)
		for _, item := range src.Items {
			if item.Path == key {
				key = item.Key
			}
		}
		return secretMount{secret: src.SecretName, key: key, subPath: m.SubPath != ""}, true
	}
	c.bad("%s=%s is on no mounted volume", variable, file)
	return secretMount{}, false
}

// metrics checks the admin listener and the scrape annotations.
func (c *checker) metrics(d *appsv1.Deployment, ctr corev1.Container, env map[string]setting) {
	m, ok := port(ctr, "metrics")
	if !ok {
		c.bad("the container has no port named metrics")
		return
	}
	addr := c.value(env, "GATEWAY_ADMIN_ADDR")
	host, p, err := splitAddr(addr)
	if err != nil || !unspecified(host) || p != strconv.Itoa(int(m.ContainerPort)) {
		c.bad("GATEWAY_ADMIN_ADDR=%q, want every interface on the metrics port %d", addr, m.ContainerPort)
	}
	a := d.Spec.Template.Annotations
	if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != strconv.Itoa(int(m.ContainerPort)) || a["prometheus.io/path"] != "/metrics" {
		c.bad("the pod's prometheus.io annotations %v do not name the metrics port %d and /metrics", a, m.ContainerPort)
	}
}
