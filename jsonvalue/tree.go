package jsonvalue

import (
	"bytes"
	"cmp"
	"slices"
	"sync"
)

// The tree path parses the whole document into nodes over a buffer of
// normalized scalars and keys, resolves each object's keys as V8 does when
// the object closes, and then prints the tree. It is taken only for
// documents with an object whose keys need reordering or deduplication.

const (
	kindScalar uint8 = iota
	kindArray
	kindObject
)

type node struct {
	kind   uint8
	marker bool
	depth  int32
	a, b   int32 // scalar: span in buf; container: span in kids
}

type treeFrame struct {
	obj  bool
	pend int32 // where the container's children start in pend
	key  span  // the key of the member being parsed
}

// member is an object member waiting for its object to close.
type member struct {
	key   span
	child int32
	index uint32 // the key's array index, when isIdx
	isIdx bool
}

type tree struct {
	buf     []byte   // normalized scalars and keys
	nodes   []node   // every value, children before their parent
	kids    []int32  // arrays: child ids; objects: key start, key end, child id
	pendArr []int32  // children of the open arrays
	pendObj []member // members of the open objects
	frames  []treeFrame
	stack   []open
}

// open is a container being printed and the position of its next child.
type open struct{ id, k int32 }

var treePool = sync.Pool{New: func() any { return new(tree) }}

func appendTree(dst, src []byte) ([]byte, Stats, int, string) {
	t := treePool.Get().(*tree)
	defer func() {
		if cap(t.buf) > 4<<20 || cap(t.nodes) > 1<<20 {
			return // do not keep the memory of a huge document
		}
		t.buf, t.nodes, t.kids = t.buf[:0], t.nodes[:0], t.kids[:0]
		t.pendArr, t.pendObj, t.frames, t.stack = t.pendArr[:0], t.pendObj[:0], t.frames[:0], t.stack[:0]
		treePool.Put(t)
	}()
	root, off, msg := t.parse(src)
	if msg != "" {
		return dst, Stats{}, off, msg
	}
	dst = t.print(dst, root)
	r := t.nodes[root]
	return dst, Stats{Depth: int(r.depth), Marker: r.marker}, 0, ""
}

func (t *tree) scalar(start int, inf bool) int32 {
	t.nodes = append(t.nodes, node{kind: kindScalar, marker: inf, a: int32(start), b: int32(len(t.buf))})
	return int32(len(t.nodes) - 1)
}

func (t *tree) parse(src []byte) (root int32, off int, msg string) {
	frames := t.frames[:0]
	defer func() { t.frames = frames[:0] }()
	n := len(src)
	i := skipWS(src, 0)
	var c byte
	var id int32
	var inf bool

value:
	if i >= n {
		return 0, i, msgEOF
	}
	c = src[i]
	switch {
	case c == '"':
		s := len(t.buf)
		t.buf, i, msg = appendString(t.buf, src, i)
		if msg != "" {
			return 0, i, msg
		}
		id = t.scalar(s, false)
	case c == '-' || ('0' <= c && c <= '9'):
		s := len(t.buf)
		t.buf, i, msg, inf = appendNumber(t.buf, src, i)
		if msg != "" {
			return 0, i, msg
		}
		id = t.scalar(s, inf)
	case c == '{' || c == '[':
		i = skipWS(src, i+1)
		obj := c == '{'
		if i < n && src[i] == c+2 {
			i++
			k := kindArray
			if obj {
				k = kindObject
			}
			t.nodes = append(t.nodes, node{kind: k, depth: 1})
			id = int32(len(t.nodes) - 1)
			break
		}
		if obj {
			frames = append(frames, treeFrame{obj: true, pend: int32(len(t.pendObj))})
			goto key
		}
		frames = append(frames, treeFrame{pend: int32(len(t.pendArr))})
		goto value
	case c == 't' || c == 'f' || c == 'n':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		if !bytes.HasPrefix(src[i:], []byte(lit)) {
			return 0, i, msgToken
		}
		s := len(t.buf)
		t.buf = append(t.buf, lit...)
		i += len(lit)
		id = t.scalar(s, false)
	default:
		return 0, i, msgToken
	}

	// id is a complete value: attach it to the open container.
attach:
	if len(frames) == 0 {
		i = skipWS(src, i)
		if i != n {
			return 0, i, msgTrailing
		}
		return id, 0, ""
	}
	if f := &frames[len(frames)-1]; f.obj {
		t.pendObj = append(t.pendObj, member{key: f.key, child: id})
		if idx, ok := arrayIndex(t.buf[f.key.start:f.key.end]); ok {
			m := &t.pendObj[len(t.pendObj)-1]
			m.index, m.isIdx = idx, true
		}
	} else {
		t.pendArr = append(t.pendArr, id)
	}
	i = skipWS(src, i)
	if i >= n {
		return 0, i, msgEOF
	}
	c = src[i]
	if f := frames[len(frames)-1]; f.obj {
		switch c {
		case ',':
			i = skipWS(src, i+1)
			goto key
		case '}':
			i++
			id = t.closeObject(int(f.pend))
			frames = frames[:len(frames)-1]
			goto attach
		}
	} else {
		switch c {
		case ',':
			i = skipWS(src, i+1)
			goto value
		case ']':
			i++
			id = t.closeArray(int(f.pend))
			frames = frames[:len(frames)-1]
			goto attach
		}
	}
	return 0, i, msgToken

key:
	if i >= n {
		return 0, i, msgEOF
	}
	if src[i] != '"' {
		return 0, i, msgToken
	}
	id = int32(len(t.buf))
	t.buf, i, msg = appendString(t.buf, src, i)
	if msg != "" {
		return 0, i, msg
	}
	frames[len(frames)-1].key = span{id, int32(len(t.buf))}
	i = skipWS(src, i)
	if i >= n {
		return 0, i, msgEOF
	}
	if src[i] != ':' {
		return 0, i, msgToken
	}
	i = skipWS(src, i+1)
	goto value
}

func (t *tree) closeArray(p int) int32 {
	nd := node{kind: kindArray, a: int32(len(t.kids))}
	for _, k := range t.pendArr[p:] {
		c := t.nodes[k]
		nd.depth = max(nd.depth, c.depth)
		nd.marker = nd.marker || c.marker
	}
	nd.depth++
	t.kids = append(t.kids, t.pendArr[p:]...)
	t.pendArr = t.pendArr[:p]
	nd.b = int32(len(t.kids))
	t.nodes = append(t.nodes, nd)
	return int32(len(t.nodes) - 1)
}

// closeObject resolves the members of an object as JSON.parse builds it: a
// duplicate key keeps the position of its first occurrence and the value of
// its last; array-index keys come first in ascending order, then the others
// in insertion order.
func (t *tree) closeObject(p int) int32 {
	ms := t.pendObj[p:]
	key := func(m member) []byte { return t.buf[m.key.start:m.key.end] }
	// Deduplicate in place: ms[:w] are the distinct keys in first-occurrence
	// order, each with the last value.
	w := 0
	if len(ms) <= smallObject {
		for _, m := range ms {
			j := 0
			for ; j < w; j++ {
				if bytes.Equal(key(ms[j]), key(m)) {
					break
				}
			}
			if j < w {
				ms[j].child = m.child
				continue
			}
			ms[w] = m
			w++
		}
	} else {
		at := make(map[string]int, len(ms))
		for _, m := range ms {
			if j, ok := at[string(key(m))]; ok {
				ms[j].child = m.child
				continue
			}
			at[string(key(m))] = w
			ms[w] = m
			w++
		}
	}
	ms = ms[:w]
	slices.SortStableFunc(ms, func(x, y member) int {
		switch {
		case x.isIdx && y.isIdx:
			return cmp.Compare(x.index, y.index)
		case x.isIdx:
			return -1
		case y.isIdx:
			return 1
		}
		return 0
	})
	nd := node{kind: kindObject, a: int32(len(t.kids))}
	for _, m := range ms {
		c := t.nodes[m.child]
		nd.depth = max(nd.depth, c.depth)
		nd.marker = nd.marker || c.marker || markerKey(key(m))
		t.kids = append(t.kids, m.key.start, m.key.end, m.child)
	}
	nd.depth++
	nd.b = int32(len(t.kids))
	t.pendObj = t.pendObj[:p]
	t.nodes = append(t.nodes, nd)
	return int32(len(t.nodes) - 1)
}

// print appends the value of node root without recursion.
func (t *tree) print(dst []byte, root int32) []byte {
	stack := t.stack[:0]
	child := root
	for {
		switch nd := t.nodes[child]; nd.kind {
		case kindScalar:
			dst = append(dst, t.buf[nd.a:nd.b]...)
		case kindArray:
			dst = append(dst, '[')
			stack = append(stack, open{child, nd.a})
		default:
			dst = append(dst, '{')
			stack = append(stack, open{child, nd.a})
		}
		// Close finished containers, then find the next child to print.
		for {
			if len(stack) == 0 {
				t.stack = stack
				return dst
			}
			top := &stack[len(stack)-1]
			nd := t.nodes[top.id]
			if top.k == nd.b {
				if nd.kind == kindArray {
					dst = append(dst, ']')
				} else {
					dst = append(dst, '}')
				}
				stack = stack[:len(stack)-1]
				continue
			}
			if top.k > nd.a {
				dst = append(dst, ',')
			}
			if nd.kind == kindArray {
				child = t.kids[top.k]
				top.k++
			} else {
				dst = append(dst, t.buf[t.kids[top.k]:t.kids[top.k+1]]...)
				dst = append(dst, ':')
				child = t.kids[top.k+2]
				top.k += 3
			}
			break
		}
	}
}
