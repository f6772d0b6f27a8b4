package bench

import (
	"bytes"
	"net/http"
	"strconv"
)

// A Shape is the request an overhead benchmark sends.
type Shape struct {
	Name   string
	Method string
	Body   []byte
}

// Payload is the 1 KiB body of the PUT shape: JSON, as an API client sends.
var Payload = func() []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":42,"tags":[`)
	for i := 0; b.Len() < 1024-40; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"tag-` + strconv.Itoa(i) + `"`)
	}
	b.WriteString(`],"name":"widget"`)
	for b.Len() < 1023 {
		b.WriteByte(' ')
	}
	b.WriteByte('}')
	return b.Bytes()
}()

// Shapes returns the request shapes: a GET, and a PUT with a 1 KiB body.
func Shapes() []Shape {
	return []Shape{
		{Name: "GET", Method: http.MethodGet},
		{Name: "PUT-1KiB", Method: http.MethodPut, Body: Payload},
	}
}
