package k8s

import (
	"bytes"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Manifests are the typed objects of a rendered YAML, by kind.
type Manifests struct {
	ConfigMaps []*corev1.ConfigMap
	Claims     []*corev1.PersistentVolumeClaim
	Jobs       []*batchv1.Job
}

// Job is the Job named name, or nil.
func (m Manifests) Job(name string) *batchv1.Job {
	for _, j := range m.Jobs {
		if j.Name == name {
			return j
		}
	}
	return nil
}

// Decode splits a multi-document YAML on its "---" lines and decodes each
// non-empty document strictly (sigs.k8s.io/yaml UnmarshalStrict: an
// unknown or duplicated field fails) into the official type its apiVersion
// and kind name: v1 ConfigMap, v1 PersistentVolumeClaim, batch/v1 Job. Any
// other kind is an error naming the document's position (1-based).
func Decode(data []byte) (Manifests, error) {
	var m Manifests
	for i, doc := range splitDocuments(data) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return m, fmt.Errorf("document %d: %w", i+1, err)
		}
		var err error
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 ConfigMap":
			o := new(corev1.ConfigMap)
			err = yaml.UnmarshalStrict(doc, o)
			m.ConfigMaps = append(m.ConfigMaps, o)
		case "v1 PersistentVolumeClaim":
			o := new(corev1.PersistentVolumeClaim)
			err = yaml.UnmarshalStrict(doc, o)
			m.Claims = append(m.Claims, o)
		case "batch/v1 Job":
			o := new(batchv1.Job)
			err = yaml.UnmarshalStrict(doc, o)
			m.Jobs = append(m.Jobs, o)
		default:
			err = fmt.Errorf("unexpected apiVersion %q kind %q", tm.APIVersion, tm.Kind)
		}
		if err != nil {
			return m, fmt.Errorf("document %d (%s): %w", i+1, tm.Kind, err)
		}
	}
	return m, nil
}

// splitDocuments are the documents of data between "---" lines, without
// those that hold only comments and blank lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		for _, line := range strings.Split(cur.String(), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				docs = append(docs, bytes.Clone(cur.Bytes()))
				break
			}
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.TrimRight(line, "\r\n") == "---" {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

// Expand is the kubelet's expansion of a container's args:
// $(NAME) becomes the value of NAME when NAME is one of the container's
// declared env variables (values gives what each resolves to; a declared
// variable missing from values expands to "<NAME>"), "$$" becomes "$",
// and any other text, also a $(NAME) of an undeclared variable, is kept.
// unresolved lists the $(NAME) references to undeclared variables.
func Expand(c corev1.Container, values map[string]string) (args []string, unresolved []string) {
	declared := map[string]string{}
	for _, e := range c.Env {
		v, ok := values[e.Name]
		switch {
		case ok:
		case e.ValueFrom == nil:
			v = e.Value
		default:
			v = "<" + e.Name + ">"
		}
		declared[e.Name] = v
	}
	for _, a := range c.Args {
		var out strings.Builder
		for i := 0; i < len(a); i++ {
			if a[i] != '$' || i+1 == len(a) {
				out.WriteByte(a[i])
				continue
			}
			switch a[i+1] {
			case '$':
				out.WriteByte('$')
				i++
			case '(':
				end := strings.IndexByte(a[i+2:], ')')
				if end < 0 {
					out.WriteString(a[i:])
					i = len(a)
					continue
				}
				name := a[i+2 : i+2+end]
				if v, ok := declared[name]; ok {
					out.WriteString(v)
				} else {
					out.WriteString(a[i : i+3+end])
					unresolved = append(unresolved, name)
				}
				i += 2 + end
			default:
				out.WriteByte('$')
			}
		}
		args = append(args, out.String())
	}
	return args, unresolved
}
