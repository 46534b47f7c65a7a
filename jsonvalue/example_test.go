package jsonvalue_test

import (
	"fmt"

	"github.com/duilie/duilie/jsonvalue"
)

func ExampleAppend() {
	in := []byte(` {"b": 1E2, "1": -0, "a": "\u0041\/\ud800", "b": [1e21, 0.0000001]} `)
	out, st, err := jsonvalue.Append(nil, in)
	fmt.Println(string(out), st.Depth, st.Marker, err)

	_, st, _ = jsonvalue.Append(nil, []byte(`{"\u0024句柄":"1"}`))
	fmt.Println("marker:", st.Marker)

	_, _, err = jsonvalue.Append(nil, []byte(`[1,]`))
	fmt.Println(err)
	// Output:
	// {"1":0,"b":[1e+21,1e-7],"a":"A/\ud800"} 2 false <nil>
	// marker: true
	// jsonvalue: unexpected character at offset 3
}

func ExampleAppendString() {
	fmt.Println(string(jsonvalue.AppendString(nil, "队列\n\"x\"\x01</\xff")))
	// Output: "队列\n\"x\"\u0001</�"
}

func ExampleElements() {
	for e := range jsonvalue.Elements([]byte(`[{"body":1},"],[",[2,3]]`)) {
		fmt.Println(string(e))
	}
	// Output:
	// {"body":1}
	// "],["
	// [2,3]
}

func ExampleMembers() {
	for k, v := range jsonvalue.Members([]byte(`{"body":{"a":[1]},"delaySeconds":30}`)) {
		name, _ := jsonvalue.Unquote(k)
		fmt.Println(name, string(v))
	}
	// Output:
	// body {"a":[1]}
	// delaySeconds 30
}

func ExampleUnquote() {
	s, ok := jsonvalue.Unquote([]byte(`"a\"b\u0001"`))
	fmt.Printf("%q %v\n", s, ok)
	s, ok = jsonvalue.Unquote([]byte(`"\ud800"`))
	fmt.Printf("%q %v\n", s, ok)
	// Output:
	// "a\"b\x01" true
	// "" false
}
