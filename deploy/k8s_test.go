package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// decoder decodes one manifest into its Kubernetes API type as the API
// server does with strict field validation: an unknown or duplicate field,
// a field in the wrong letter case or of the wrong type, or a kind outside
// the types the gateway's manifests use, is an error.
type decoder struct{ runtime.Decoder }

func newDecoder() (decoder, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, autoscalingv2.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return decoder{}, err
		}
	}
	return decoder{serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()}, nil
}

func (d decoder) decode(doc []byte) (runtime.Object, error) {
	obj, _, err := d.Decode(doc, nil, nil)
	return obj, err
}

// decodeKustomization decodes a kustomization.yaml as strictly.
func decodeKustomization(doc []byte) (*types.Kustomization, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	var k types.Kustomization
	strict, err := json.UnmarshalStrict(j, &k)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(strict...); err != nil {
		return nil, err
	}
	return &k, nil
}

// documents splits a YAML stream into its documents.
func documents(b []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, nil)
}

// render builds a kustomization under k8s/ with kustomize and decodes each
// resource strictly.
func render(t *testing.T, dec decoder, dir string) []runtime.Object {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, "k8s", dir))
	if err != nil {
		t.Fatalf("kustomize build k8s/%s: %v", dir, err)
	}
	var objs []runtime.Object
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatalf("k8s/%s: %s: %v", dir, r.CurId(), err)
		}
		obj, err := dec.decode(y)
		if err != nil {
			t.Fatalf("k8s/%s renders %s, which does not decode strictly: %v", dir, r.CurId(), err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// Every file under k8s/ decodes strictly: each manifest into its API type,
// each kustomization.yaml into kustomize's.
func TestManifestsDecodeStrictly(t *testing.T) {
	dec, err := newDecoder()
	if err != nil {
		t.Fatal(err)
	}
	var files int
	err = filepath.WalkDir(filepath.Join(root, "k8s"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		// Other files are a generator's input (a key, an env file).
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, p)
		b := readRepo(t, rel)
		if base := filepath.Base(p); base == "kustomization.yaml" || base == "kustomization.yml" {
			if _, err := decodeKustomization(b); err != nil {
				t.Errorf("%s: %v", rel, err)
			}
			return nil
		}
		docs, err := documents(b)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
		}
		if len(docs) == 0 {
			t.Errorf("%s: no manifest", rel)
		}
		for i, doc := range docs {
			if _, err := dec.decode(doc); err != nil {
				t.Errorf("%s, document %d: %v", rel, i+1, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 8 {
		t.Errorf("k8s/ has %d YAML files, want the base and the overlay", files)
	}
}

// Strict decoding turns away what a lenient one would let pass.
func TestStrictDecodingBites(t *testing.T) {
	dec, err := newDecoder()
	if err != nil {
		t.Fatal(err)
	}
	good := "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  sessionAffinity: None\n"
	if _, err := dec.decode([]byte(good)); err != nil {
		t.Fatalf("a good manifest: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown field":   strings.Replace(good, "sessionAffinity", "sessionAfinity", 1),
		"letter case":     strings.Replace(good, "sessionAffinity", "SessionAffinity", 1),
		"duplicate field": good + "  sessionAffinity: ClientIP\n",
		"wrong type":      strings.Replace(good, "None", "[None]", 1),
		"unknown kind":    strings.Replace(good, "kind: Service", "kind: Servce", 1),
	} {
		if _, err := dec.decode([]byte(doc)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - a.yaml\n"
	if _, err := decodeKustomization([]byte(k)); err != nil {
		t.Fatalf("a good kustomization: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown field":   strings.Replace(k, "resources", "resource", 1),
		"letter case":     strings.Replace(k, "resources", "Resources", 1),
		"duplicate field": k + "resources: []\n",
	} {
		if _, err := decodeKustomization([]byte(doc)); err == nil {
			t.Errorf("kustomization, %s: decoded", name)
		}
	}
}

func TestKustomizations(t *testing.T) {
	dec, err := newDecoder()
	if err != nil {
		t.Fatal(err)
	}
	problems, img := checkDockerfile(readRepo(t, "Dockerfile"), repoPins(t))
	if len(problems) > 0 {
		t.Fatalf("the Dockerfile: %v", problems)
	}
	f := facts{routes: routes(t), defaults: gatewayDefaults(t), image: img}
	t.Run("base", func(t *testing.T) {
		objs := render(t, dec, "base")
		// The base ships no key: an overlay or the cluster provides it.
		if s := objects[*corev1.Secret](objs); len(s) > 0 {
			t.Errorf("the base renders Secret %s: it must ship no secret value", s[0].Name)
		}
		for _, p := range checkCluster(objs, f) {
			t.Error(p)
		}
	})
	t.Run("overlays/example", func(t *testing.T) {
		objs := render(t, dec, "overlays/example")
		f := f
		f.secret = true
		for _, p := range checkCluster(objs, f) {
			t.Error(p)
		}
		// The example's key is there to be replaced: the gateway must refuse
		// it (under 32 bytes), so that nobody signs with a key published here.
		for _, s := range objects[*corev1.Secret](objs) {
			for k, v := range s.Data {
				if len(strings.TrimSpace(string(v))) >= 32 {
					t.Errorf("Secret %s key %s holds a value the gateway would take: an example must not ship a usable key", s.Name, k)
				}
			}
		}
		ns := objects[*corev1.Namespace](objs)
		if len(ns) != 1 || ns[0].Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			t.Errorf("the overlay's namespace does not enforce the restricted Pod Security Standard")
		}
		for _, o := range objs {
			if m, err := meta.Accessor(o); err != nil || m.GetNamespace() == "" && kind(o) != "Namespace" {
				t.Errorf("%s %s has no namespace (%v)", kind(o), name(o), err)
			}
		}
	})
}

func kind(o runtime.Object) string { return reflect.TypeOf(o).Elem().Name() }

func name(o runtime.Object) string {
	m, err := meta.Accessor(o)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return m.GetName()
}
