package deploy

// Checks of the objects around the Deployment: the Service, the
// autoscaler, the disruption budget and the network policy.

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func (c *checker) service(pod map[string]string, ctr corev1.Container) {
	svcs := objects[*corev1.Service](c.objs)
	if len(svcs) != 1 {
		c.bad("%d Services, want 1", len(svcs))
		return
	}
	s := svcs[0]
	if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod)) {
		c.bad("Service %s does not select the gateway's pods", s.Name)
	}
	if s.Spec.SessionAffinity != corev1.ServiceAffinityNone {
		c.bad("Service %s: sessionAffinity %q, want None: any replica serves any client", s.Name, s.Spec.SessionAffinity)
	}
	http, _ := port(ctr, "http")
	metrics, _ := port(ctr, "metrics")
	var toHTTP bool
	for _, p := range s.Spec.Ports {
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port)
		}
		switch {
		case targets(target, http):
			toHTTP = true
		case targets(target, metrics):
			c.bad("Service %s exposes the metrics port", s.Name)
		default:
			c.bad("Service %s: port %s targets %s, which is no port of the container", s.Name, p.Name, target.String())
		}
	}
	if !toHTTP {
		c.bad("Service %s has no port to the http port", s.Name)
	}
}

func (c *checker) autoscaler(d *appsv1.Deployment, ctr corev1.Container) {
	hpas := objects[*autoscalingv2.HorizontalPodAutoscaler](c.objs)
	if len(hpas) != 1 {
		c.bad("%d HorizontalPodAutoscalers, want 1", len(hpas))
		return
	}
	h := hpas[0]
	if ref := h.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != d.Name {
		c.bad("HorizontalPodAutoscaler %s scales %s %s %s, not Deployment %s", h.Name, ref.APIVersion, ref.Kind, ref.Name, d.Name)
	}
	switch {
	case h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2:
		c.bad("HorizontalPodAutoscaler %s: minReplicas %v, want 2 or more", h.Name, h.Spec.MinReplicas)
	case h.Spec.MaxReplicas < *h.Spec.MinReplicas:
		c.bad("HorizontalPodAutoscaler %s: maxReplicas below minReplicas", h.Name)
	case d.Spec.Replicas != nil && (*d.Spec.Replicas < *h.Spec.MinReplicas || *d.Spec.Replicas > h.Spec.MaxReplicas):
		c.bad("Deployment %s: %d replicas, outside the autoscaler's range", d.Name, *d.Spec.Replicas)
	}
	for _, m := range h.Spec.Metrics {
		if m.Resource != nil && m.Resource.Target.Type == autoscalingv2.UtilizationMetricType {
			if q, ok := ctr.Resources.Requests[m.Resource.Name]; !ok || q.IsZero() {
				c.bad("HorizontalPodAutoscaler %s scales on %s utilization, which the container does not request", h.Name, m.Resource.Name)
			}
		}
	}
	if len(h.Spec.Metrics) == 0 {
		c.bad("HorizontalPodAutoscaler %s has no metric", h.Name)
	}
}

func (c *checker) disruptionBudget(pod map[string]string) {
	pdbs := objects[*policyv1.PodDisruptionBudget](c.objs)
	if len(pdbs) != 1 {
		c.bad("%d PodDisruptionBudgets, want 1", len(pdbs))
		return
	}
	p := pdbs[0]
	if !selects(p.Spec.Selector, pod) {
		c.bad("PodDisruptionBudget %s does not select the gateway's pods", p.Name)
	}
	// A budget that allows no eviction blocks every node drain.
	if mu := p.Spec.MaxUnavailable; mu == nil || mu.Type == intstr.Int && mu.IntVal < 1 || p.Spec.MinAvailable != nil {
		c.bad("PodDisruptionBudget %s: want maxUnavailable of 1 or more, and no minAvailable", p.Name)
	}
}

func (c *checker) networkPolicy(pod map[string]string, ctr corev1.Container) {
	nps := objects[*networkingv1.NetworkPolicy](c.objs)
	if len(nps) != 1 {
		c.bad("%d NetworkPolicies, want 1", len(nps))
		return
	}
	np := nps[0]
	if !selects(&np.Spec.PodSelector, pod) || len(np.Spec.PodSelector.MatchLabels)+len(np.Spec.PodSelector.MatchExpressions) == 0 {
		c.bad("NetworkPolicy %s does not select the gateway's pods (alone)", np.Name)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		c.bad("NetworkPolicy %s: policyTypes %v, want Ingress and Egress", np.Name, np.Spec.PolicyTypes)
	}
	http, _ := port(ctr, "http")
	metrics, _ := port(ctr, "metrics")
	covers := func(ports []networkingv1.NetworkPolicyPort, p corev1.ContainerPort) bool {
		return len(ports) == 0 || slices.ContainsFunc(ports, func(np networkingv1.NetworkPolicyPort) bool { return np.Port == nil || targets(*np.Port, p) })
	}
	var httpOpen, metricsScraped bool
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port != nil && !slices.ContainsFunc(ctr.Ports, func(cp corev1.ContainerPort) bool { return targets(*p.Port, cp) }) {
				c.bad("NetworkPolicy %s admits port %s, which is no port of the container", np.Name, p.Port.String())
			}
		}
		if covers(rule.Ports, http) && len(rule.From) == 0 {
			httpOpen = true
		}
		if covers(rule.Ports, metrics) {
			metricsScraped = true
			if len(rule.From) == 0 || slices.ContainsFunc(rule.From, func(p networkingv1.NetworkPolicyPeer) bool { return p.NamespaceSelector == nil || p.IPBlock != nil }) {
				c.bad("NetworkPolicy %s admits the metrics port from more than a monitoring namespace", np.Name)
			}
		}
	}
	if !httpOpen {
		c.bad("NetworkPolicy %s does not admit the http port", np.Name)
	}
	if !metricsScraped {
		c.bad("NetworkPolicy %s does not admit the metrics port from anywhere: nothing can scrape it", np.Name)
	}
	dns := slices.ContainsFunc(np.Spec.Egress, func(rule networkingv1.NetworkPolicyEgressRule) bool {
		return slices.ContainsFunc(rule.Ports, func(p networkingv1.NetworkPolicyPort) bool {
			return p.Port != nil && p.Port.IntValue() == 53 && p.Protocol != nil && *p.Protocol == corev1.ProtocolUDP
		})
	})
	if !dns {
		c.bad("NetworkPolicy %s allows no DNS out", np.Name)
	}
}

func selects(sel *metav1.LabelSelector, pod map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && sel != nil && !s.Empty() && s.Matches(labels.Set(pod))
}
