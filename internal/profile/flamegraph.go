package profile

import (
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"sort"
	"strings"
)

// subColors are the flame graph's colours per subsystem (Okabe-Ito and
// tints); frames no signature names are drawn in warm greys.
var subColors = map[string]string{
	SubLock: "#d55e00", SubSinval: "#cc79a7", SubCatalog: "#e69f00", SubParser: "#a6cee3", SubPlanner: "#56b4e9",
	SubExecutor: "#0072b2", SubAccess: "#009e73", SubWAL: "#f0e442", SubFS: "#b15928", SubMemory: "#6a3d9a",
	SubNetwork: "#33a02c", SubSched: "#999999",
}

type flameNode struct {
	name     string
	samples  int
	children map[string]*flameNode
}

func (n *flameNode) child(name string) *flameNode {
	if n.children == nil {
		n.children = map[string]*flameNode{}
	}
	c := n.children[name]
	if c == nil {
		c = &flameNode{name: name}
		n.children[name] = c
	}
	return c
}

// FlameGraph writes the folded stacks of s as a flame graph: one
// self-contained SVG document (no scripts, no external references; each
// frame's <title> gives its name, samples and share, shown by a browser
// on hover). Frames are coloured by subsystem, with a legend; width is
// the share of samples, the root at the bottom. title heads the graph.
func (s *Summary) FlameGraph(w io.Writer, title string) error {
	const (
		width = 1200.0
		rowH  = 16.0
		pad   = 10.0
		minW  = 0.3 // px: narrower frames are not drawn
	)
	root := &flameNode{name: "all"}
	depth := 0
	for _, f := range s.Folded {
		n := root
		n.samples += f.Samples
		frames := strings.Split(f.Stack, ";")
		depth = max(depth, len(frames))
		for _, fr := range frames {
			n = n.child(fr)
			n.samples += f.Samples
		}
	}
	// The legend: a swatch and label per subsystem, wrapped to the width.
	type entry struct {
		x, y  float64
		color string
		label string
	}
	var legend []entry
	lx, ly := pad, 24.0
	for _, sub := range Subsystems {
		c := subColors[sub]
		if c == "" {
			c = "#d9cbb6"
		}
		label := fmt.Sprintf("%s %.1f%%", sub, s.Share(sub))
		w := 13 + 6.2*float64(len(label)) + 10
		if lx+w > width+pad {
			lx, ly = pad, ly+15
		}
		legend = append(legend, entry{lx, ly, c, label})
		lx += w
	}
	legendH := ly + 16
	height := legendH + float64(depth+1)*rowH + 2*pad
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n",
		width+2*pad, height, width+2*pad, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fdfdfd"/><text x="%.0f" y="16" font-size="13">%s</text>`+"\n", pad, html.EscapeString(title))
	for _, e := range legend {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			e.x, e.y, e.color, e.x+13, e.y+9, html.EscapeString(e.label))
	}
	if root.samples == 0 {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">no samples</text>`, pad, legendH+rowH+pad)
	}
	subs := map[Frame]frameClass{}
	var draw func(n *flameNode, x0 float64, level int)
	draw = func(n *flameNode, x0 float64, level int) {
		w := width * float64(n.samples) / float64(root.samples)
		if w < minW {
			return
		}
		y := height - pad - float64(level+1)*rowH
		fill := "#d9cbb6"
		if level > 1 { // level 1 is the process name
			f := frameOf(n.name)
			fc, ok := subs[f]
			if !ok {
				fc.sub, fc.specific = frameSub(f)
				subs[f] = fc
			}
			if c, ok := subColors[fc.sub]; ok {
				fill = c
			} else {
				fill = warm(n.name)
			}
		}
		share := 100 * float64(n.samples) / float64(root.samples)
		fmt.Fprintf(&b, `<g><title>%s (%d samples, %.2f%%)</title><rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s" stroke="#fff" stroke-width="0.5"/>`,
			html.EscapeString(n.name), n.samples, share, x0, y, w, rowH-1, fill)
		if chars := int((w - 4) / 6.5); chars >= 3 {
			label := n.name
			if len(label) > chars {
				label = label[:chars-2] + ".."
			}
			fmt.Fprintf(&b, `<text x="%.2f" y="%.1f">%s</text>`, x0+2, y+rowH-4, html.EscapeString(label))
		}
		b.WriteString("</g>\n")
		kids := make([]*flameNode, 0, len(n.children))
		for _, c := range n.children {
			kids = append(kids, c)
		}
		sort.Slice(kids, func(i, j int) bool { return kids[i].name < kids[j].name })
		cx := x0
		for _, c := range kids {
			draw(c, cx, level+1)
			cx += width * float64(c.samples) / float64(root.samples)
		}
	}
	if root.samples > 0 {
		draw(root, pad, 0)
	}
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("flame graph: %w", err)
	}
	return nil
}

// warm is a stable warm grey-orange for a frame no signature names.
func warm(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	r := 200 + int(v%40)
	g := 170 + int((v>>8)%50)
	bl := 130 + int((v>>16)%40)
	return fmt.Sprintf("#%02x%02x%02x", r, g, bl)
}
