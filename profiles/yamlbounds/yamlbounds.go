package yamlbounds

import "go.yaml.in/yaml/v3"

// Bounds are the limits a document must stay within. Every field must be
// positive.
type Bounds struct {
	// Depth bounds the nesting of mappings and sequences, aliases counted
	// where they are used.
	Depth int
	// Nodes bounds the YAML nodes with every alias expanded where it is
	// used (billion laughs stays small).
	Nodes int
	// ScalarBytes bounds one scalar (key or value), in bytes.
	ScalarBytes int
}

// Crossed is the first bound a document crossed.
type Crossed struct {
	// Limit is "MaxDepth", "MaxNodes" or "MaxScalarBytes".
	Limit string
	// Max is the bound's value.
	Max int
	// Line is the 1-based line of the node that crossed it.
	Line int
}

// Check walks root, expanding each alias where it is used, and returns the
// first bound crossed, or nil.
func Check(root *yaml.Node, b Bounds) *Crossed {
	nodes := 0
	var walk func(n *yaml.Node, depth int) *Crossed
	walk = func(n *yaml.Node, depth int) *Crossed {
		if n == nil {
			return nil
		}
		nodes++
		switch {
		case nodes > b.Nodes:
			return &Crossed{Limit: "MaxNodes", Max: b.Nodes, Line: n.Line}
		case depth > b.Depth:
			return &Crossed{Limit: "MaxDepth", Max: b.Depth, Line: n.Line}
		case len(n.Value) > b.ScalarBytes:
			return &Crossed{Limit: "MaxScalarBytes", Max: b.ScalarBytes, Line: n.Line}
		case n.Kind == yaml.AliasNode:
			return walk(n.Alias, depth)
		}
		for _, c := range n.Content {
			if err := walk(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root, 0)
}
