package deploy

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// one is the single object of type T in objs.
func one[T runtime.Object](t *testing.T, objs []runtime.Object) T {
	t.Helper()
	all := objects[T](objs)
	if len(all) != 1 {
		t.Fatalf("%d objects of type %T, want 1", len(all), *new(T))
	}
	return all[0]
}

func gatewayContainer(t *testing.T, objs []runtime.Object) *corev1.Container {
	t.Helper()
	return &one[*appsv1.Deployment](t, objs).Spec.Template.Spec.Containers[0]
}

func setEnv(ctr *corev1.Container, name, value string) {
	ctr.Env = slices.DeleteFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if value != "" {
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: name, Value: value})
	}
}

func ptr[T any](v T) *T { return &v }

// secretNamed is the single Secret in objs whose name starts with prefix
// (a generated one ends in a hash of its content).
func secretNamed(t *testing.T, objs []runtime.Object, prefix string) *corev1.Secret {
	t.Helper()
	all := slices.DeleteFunc(objects[*corev1.Secret](objs), func(s *corev1.Secret) bool { return !strings.HasPrefix(s.Name, prefix) })
	if len(all) != 1 {
		t.Fatalf("%d Secrets named %s*, want 1", len(all), prefix)
	}
	return all[0]
}

// volumeNamed is the Deployment's volume called name.
func volumeNamed(t *testing.T, objs []runtime.Object, name string) *corev1.Volume {
	t.Helper()
	vols := one[*appsv1.Deployment](t, objs).Spec.Template.Spec.Volumes
	i := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == name })
	if i < 0 {
		t.Fatalf("no volume %s", name)
	}
	return &vols[i]
}

// exampleOverlay is the example overlay rendered, and the facts it must
// agree with.
func exampleOverlay(t *testing.T) ([]runtime.Object, facts) {
	t.Helper()
	dec, err := newDecoder()
	if err != nil {
		t.Fatal(err)
	}
	_, img := checkDockerfile(readRepo(t, "Dockerfile"), repoPins(t))
	return render(t, dec, "overlays/example"), facts{routes: routes(t), defaults: gatewayDefaults(t), image: img, secret: true}
}

// clone is a deep copy of a rendering and its facts, to change.
func clone(objs []runtime.Object, f facts) ([]runtime.Object, facts) {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject()
	}
	f.routes = maps.Clone(f.routes)
	f.defaults = maps.Clone(f.defaults)
	f.image.env = maps.Clone(f.image.env)
	return out, f
}

// A mutation breaks one property of the example overlay, or of the facts
// it is checked against, and names the problem that must be reported.
type mutation struct {
	name    string
	change  func(t *testing.T, objs []runtime.Object, f *facts)
	problem string
}

func dep(t *testing.T, objs []runtime.Object) *appsv1.Deployment {
	return one[*appsv1.Deployment](t, objs)
}

func cm(t *testing.T, objs []runtime.Object) *corev1.ConfigMap {
	return one[*corev1.ConfigMap](t, objs)
}

// bite checks the example overlay with each mutation applied: a problem
// with the mutation's text must be among those reported or, when alone is
// set, be the only one, so that the mutation is shown to trip that check
// and nothing else.
func bite(t *testing.T, mutations []mutation, alone bool) {
	t.Helper()
	rendered, good := exampleOverlay(t)
	if p := checkCluster(rendered, good); len(p) > 0 {
		t.Fatalf("the overlay itself: %q", p)
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			objs, f := clone(rendered, good)
			m.change(t, objs, &f)
			problems := checkCluster(objs, f)
			matches := func(p string) bool { return strings.Contains(p, m.problem) }
			switch {
			case !slices.ContainsFunc(problems, matches):
				t.Errorf("problems %q, want one with %q", problems, m.problem)
			case alone && len(problems) != 1:
				t.Errorf("problems %q, want only the one with %q", problems, m.problem)
			}
		})
	}
}

// Each check of the rendered manifests finds what it is there for: the
// example overlay with one thing broken has that problem.
func TestClusterChecksBite(t *testing.T) {
	svc := func(t *testing.T, objs []runtime.Object) *corev1.Service { return one[*corev1.Service](t, objs) }
	np := func(t *testing.T, objs []runtime.Object) *networkingv1.NetworkPolicy {
		return one[*networkingv1.NetworkPolicy](t, objs)
	}
	bite(t, []mutation{
		{"one replica", func(t *testing.T, o []runtime.Object, _ *facts) { dep(t, o).Spec.Replicas = ptr[int32](1) }, "replicas"},
		{"selector", func(t *testing.T, o []runtime.Object, _ *facts) {
			dep(t, o).Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		}, "its selector"},
		{"readiness path", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).ReadinessProbe.HTTPGet.Path = "/ready"
		}, "readiness probe asks /ready"},
		{"liveness on readiness", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).LivenessProbe.HTTPGet.Path = "/readyz"
		}, "liveness probe asks /readyz"},
		{"no such route", func(_ *testing.T, _ []runtime.Object, f *facts) { delete(f.routes, "GET /healthz") }, "openapi.yaml does not document"},
		{"probe port", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).LivenessProbe.HTTPGet.Port = intstr.FromInt32(9090)
		}, "not the http port"},
		{"no readiness probe", func(t *testing.T, o []runtime.Object, _ *facts) { gatewayContainer(t, o).ReadinessProbe = nil }, "no readiness probe"},
		{"short grace", func(t *testing.T, o []runtime.Object, _ *facts) {
			dep(t, o).Spec.Template.Spec.TerminationGracePeriodSeconds = ptr[int64](40)
		}, "terminationGracePeriodSeconds"},
		{"default grace", func(t *testing.T, o []runtime.Object, _ *facts) {
			dep(t, o).Spec.Template.Spec.TerminationGracePeriodSeconds = nil
		}, "terminationGracePeriodSeconds"},
		{"longer drain in the ConfigMap", func(t *testing.T, o []runtime.Object, _ *facts) {
			cm(t, o).Data["GATEWAY_SHUTDOWN_GRACE"] = "45s"
		}, "terminationGracePeriodSeconds"},
		{"longer drain by default", func(t *testing.T, o []runtime.Object, f *facts) {
			delete(cm(t, o).Data, "GATEWAY_TERM_GRACE")
			f.defaults["GATEWAY_TERM_GRACE"] = "30s"
		}, "terminationGracePeriodSeconds"},
		{"longer drain in env", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_STDIN_GRACE", "1m")
		}, "terminationGracePeriodSeconds"},
		{"not a duration", func(t *testing.T, o []runtime.Object, _ *facts) { cm(t, o).Data["GATEWAY_SHUTDOWN_TIMEOUT"] = "10" }, "GATEWAY_SHUTDOWN_TIMEOUT"},
		{"no preStop", func(t *testing.T, o []runtime.Object, _ *facts) { gatewayContainer(t, o).Lifecycle = nil }, "preStop"},
		{"loopback", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_ADDR", "127.0.0.1:8080")
		}, "every interface"},
		{"default address", func(t *testing.T, o []runtime.Object, f *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_ADDR", "")
			delete(f.image.env, "GATEWAY_ADDR")
		}, "every interface"},
		{"other port", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_ADDR", ":8081")
		}, "but the http port"},
		{"no resources", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).Resources = corev1.ResourceRequirements{}
		}, "resources"},
		{"no memory limit", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).Resources.Limits = nil
		}, "resources"},
		{"service links", func(t *testing.T, o []runtime.Object, _ *facts) {
			dep(t, o).Spec.Template.Spec.EnableServiceLinks = nil
		}, "enableServiceLinks"},
		{"latest", func(t *testing.T, o []runtime.Object, _ *facts) { gatewayContainer(t, o).Image = "stdiomcp/gateway" }, "image"},
		{"root allowed", func(t *testing.T, o []runtime.Object, _ *facts) {
			dep(t, o).Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil
		}, "runAsNonRoot"},
		{"other user", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).SecurityContext.RunAsUser = ptr[int64](1000)
		}, "runAsUser"},
		{"privilege escalation", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).SecurityContext.AllowPrivilegeEscalation = ptr(true)
		}, "allowPrivilegeEscalation"},
		{"privileged", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).SecurityContext.Privileged = ptr(true)
		}, "privileged"},
		{"capabilities kept", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).SecurityContext.Capabilities.Drop = nil
		}, "capabilities"},
		{"capability added", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		}, "capabilities"},
		{"no seccomp", func(t *testing.T, o []runtime.Object, _ *facts) {
			dep(t, o).Spec.Template.Spec.SecurityContext.SeccompProfile = nil
		}, "seccompProfile"},
		{"unconfined", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, "seccompProfile"},
		{"API token", func(t *testing.T, o []runtime.Object, _ *facts) {
			dep(t, o).Spec.Template.Spec.AutomountServiceAccountToken = ptr(true)
		}, "automountServiceAccountToken"},
		{"writable root", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).SecurityContext.ReadOnlyRootFilesystem = nil
		}, "readOnlyRootFilesystem"},
		{"no /tmp", func(t *testing.T, o []runtime.Object, _ *facts) {
			c := gatewayContainer(t, o)
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" })
		}, "/tmp is not a writable emptyDir"},
		{"HOME elsewhere", func(_ *testing.T, _ []runtime.Object, f *facts) { f.image.env["HOME"] = "/home/node" }, "/home/node is not a writable emptyDir"},
		{"no such key", func(t *testing.T, o []runtime.Object, _ *facts) {
			s := secretNamed(t, o, "gateway-secret")
			s.Data = map[string][]byte{"other": []byte("x")}
		}, "has no key"},
		{"no Secret", func(t *testing.T, o []runtime.Object, _ *facts) {
			secretNamed(t, o, "gateway-secret").Name = "other"
		}, "not in the rendering"},
		{"no key at all", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_SECRET_FILE", "")
		}, "neither GATEWAY_SECRET"},
		{"key in the manifest", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_SECRET_FILE", "")
			setEnv(gatewayContainer(t, o), "GATEWAY_SECRET", "hunter2")
		}, "not from a Secret"},
		{"key from a secretKeyRef", func(t *testing.T, o []runtime.Object, _ *facts) {
			c := gatewayContainer(t, o)
			setEnv(c, "GATEWAY_SECRET_FILE", "")
			c.Env = append(c.Env, corev1.EnvVar{Name: "GATEWAY_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secretNamed(t, o, "gateway-secret").Name}, Key: "nope"}}})
		}, "has no key nope"},
		{"key file elsewhere", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_SECRET_FILE", "/etc/elsewhere/key")
		}, "on no mounted volume"},
		{"key file on an emptyDir", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_SECRET_FILE", "/tmp/key")
		}, "not a Secret"},
		{"key file of another name", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_SECRET_FILE", "/etc/gateway/secret/token")
		}, "has no key token"},
		{"no ConfigMap", func(t *testing.T, o []runtime.Object, _ *facts) { cm(t, o).Name = "other" }, "not in the rendering"},
		{"metrics on loopback", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_ADMIN_ADDR", "127.0.0.1:9090")
		}, "GATEWAY_ADMIN_ADDR"},
		{"scrape port", func(t *testing.T, o []runtime.Object, _ *facts) {
			dep(t, o).Spec.Template.Annotations["prometheus.io/port"] = "8080"
		}, "prometheus.io"},
		{"session affinity", func(t *testing.T, o []runtime.Object, _ *facts) {
			svc(t, o).Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}, "sessionAffinity"},
		{"service target", func(t *testing.T, o []runtime.Object, _ *facts) {
			svc(t, o).Spec.Ports[0].TargetPort = intstr.FromString("web")
		}, "no port of the container"},
		{"service exposes metrics", func(t *testing.T, o []runtime.Object, _ *facts) {
			svc(t, o).Spec.Ports = append(svc(t, o).Spec.Ports, corev1.ServicePort{Name: "m", Port: 9090, TargetPort: intstr.FromString("metrics")})
		}, "exposes the metrics port"},
		{"service selector", func(t *testing.T, o []runtime.Object, _ *facts) {
			svc(t, o).Spec.Selector = map[string]string{"app": "other"}
		}, "does not select"},
		{"autoscaler target", func(t *testing.T, o []runtime.Object, _ *facts) {
			one[*autoscalingv2.HorizontalPodAutoscaler](t, o).Spec.ScaleTargetRef.Name = "other"
		}, "scales"},
		{"autoscaler scales a StatefulSet", func(t *testing.T, o []runtime.Object, _ *facts) {
			h := one[*autoscalingv2.HorizontalPodAutoscaler](t, o)
			h.Spec.ScaleTargetRef.Kind = "StatefulSet"
		}, "scales"},
		{"autoscaler minimum", func(t *testing.T, o []runtime.Object, _ *facts) {
			one[*autoscalingv2.HorizontalPodAutoscaler](t, o).Spec.MinReplicas = ptr[int32](1)
		}, "minReplicas"},
		{"autoscaler on unrequested cpu", func(t *testing.T, o []runtime.Object, _ *facts) {
			gatewayContainer(t, o).Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, "utilization"},
		{"budget selector", func(t *testing.T, o []runtime.Object, _ *facts) {
			one[*policyv1.PodDisruptionBudget](t, o).Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		}, "PodDisruptionBudget"},
		{"budget blocks drains", func(t *testing.T, o []runtime.Object, _ *facts) {
			one[*policyv1.PodDisruptionBudget](t, o).Spec.MaxUnavailable = ptr(intstr.FromInt32(0))
		}, "maxUnavailable"},
		{"policy on another port", func(t *testing.T, o []runtime.Object, _ *facts) {
			np(t, o).Spec.Ingress[0].Ports[0].Port = ptr(intstr.FromInt32(8081))
		}, "does not admit the http port"},
		{"metrics open to all", func(t *testing.T, o []runtime.Object, _ *facts) {
			np(t, o).Spec.Ingress[1].From = nil
		}, "more than a monitoring namespace"},
		{"metrics closed", func(t *testing.T, o []runtime.Object, _ *facts) {
			np(t, o).Spec.Ingress = np(t, o).Spec.Ingress[:1]
		}, "nothing can scrape it"},
		{"no DNS", func(t *testing.T, o []runtime.Object, _ *facts) { np(t, o).Spec.Egress = nil }, "DNS"},
		{"egress open", func(t *testing.T, o []runtime.Object, _ *facts) {
			np(t, o).Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		}, "policyTypes"},
	}, false)
}

// Each check of who may call finds what it is there for, and nothing
// else: the overlay with one thing about its credentials broken has that
// problem alone.
func TestClusterAuthChecksBite(t *testing.T) {
	bite(t, []mutation{
		{"no need for credentials", func(t *testing.T, o []runtime.Object, _ *facts) {
			cm(t, o).Data["GATEWAY_REQUIRE_AUTH"] = "false"
		}, "GATEWAY_REQUIRE_AUTH"},
		{"credentials optional by default", func(t *testing.T, o []runtime.Object, _ *facts) {
			delete(cm(t, o).Data, "GATEWAY_REQUIRE_AUTH")
		}, "GATEWAY_REQUIRE_AUTH"},
		{"no credentials", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_AUTH_TOKENS_FILE", "")
		}, "no authentication"},
		{"tokens in the manifest", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_AUTH_TOKENS", "ci:0123456789abcdef0123456789abcdef")
		}, "GATEWAY_AUTH_TOKENS comes from the env"},
		{"tokens in the ConfigMap", func(t *testing.T, o []runtime.Object, _ *facts) {
			cm(t, o).Data["GATEWAY_AUTH_TOKENS"] = "ci:0123456789abcdef0123456789abcdef"
		}, "GATEWAY_AUTH_TOKENS comes from the configmap"},
		{"tokens from a secretKeyRef", func(t *testing.T, o []runtime.Object, _ *facts) {
			c := gatewayContainer(t, o)
			setEnv(c, "GATEWAY_AUTH_TOKENS_FILE", "")
			c.Env = append(c.Env, corev1.EnvVar{Name: "GATEWAY_AUTH_TOKENS", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "gateway-auth"}, Key: "nope"}}})
		}, "has no key nope"},
		{"tokens file on an emptyDir", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_AUTH_TOKENS_FILE", "/tmp/tokens")
		}, "GATEWAY_AUTH_TOKENS_FILE=/tmp/tokens is on volume tmp, which is not a Secret"},
		{"tokens file on a ConfigMap", func(t *testing.T, o []runtime.Object, _ *facts) {
			volumeNamed(t, o, "auth").VolumeSource = corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: cm(t, o).Name}}}
		}, "is on volume auth, which is not a Secret"},
		{"tokens file elsewhere", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_AUTH_TOKENS_FILE", "/etc/elsewhere/tokens")
		}, "GATEWAY_AUTH_TOKENS_FILE=/etc/elsewhere/tokens is on no mounted volume"},
		{"tokens file through a subPath", func(t *testing.T, o []runtime.Object, _ *facts) {
			c := gatewayContainer(t, o)
			i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "auth" })
			c.VolumeMounts[i].MountPath, c.VolumeMounts[i].SubPath = "/etc/gateway/auth/tokens", "tokens"
		}, "subPath"},
		{"tokens file of another name", func(t *testing.T, o []runtime.Object, _ *facts) {
			setEnv(gatewayContainer(t, o), "GATEWAY_AUTH_TOKENS_FILE", "/etc/gateway/auth/list")
		}, "has no key list"},
		{"no tokens Secret", func(t *testing.T, o []runtime.Object, _ *facts) {
			secretNamed(t, o, "gateway-auth").Name = "other"
		}, "the tokens file comes from Secret gateway-auth, which is not in the rendering"},
	}, true)
}

func TestParseUsage(t *testing.T) {
	defaults := gatewayDefaults(t)
	if got := defaults["GATEWAY_ADDR"]; got != "127.0.0.1:8080" {
		t.Errorf("GATEWAY_ADDR's default %q, want 127.0.0.1:8080", got)
	}
	if got, ok := defaults["GATEWAY_COMMAND"]; !ok || got != "" {
		t.Errorf("GATEWAY_COMMAND's default %q (%v), want an empty one", got, ok)
	}
	for _, name := range stopBudget {
		if _, err := time.ParseDuration(defaults[name]); err != nil {
			t.Errorf("%s's default: %v", name, err)
		}
	}
}
