package ui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/leasehold/leasehold/internal/admin"
)

// markup is text that would be markup if written unescaped, in text and
// in a double-quoted attribute.
const markup = `<b id="x">'"&amp;</b><script>alert(1)</script>`

// checkRows parses rows as a table's body and checks that no element but
// the rows' own appears and that the owner cells hold want as text.
func checkRows(rows, want string) error {
	doc, err := html.Parse(strings.NewReader("<table><tbody>" + rows + "</tbody></table>"))
	if err != nil {
		return err
	}
	var errs []error
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "html", "head", "body", "table", "tbody", "tr", "td", "a", "span":
			default:
				errs = append(errs, fmt.Errorf("element <%s> in the rows", n.Data))
			}
			for _, a := range n.Attr {
				if a.Key == "class" && a.Val == "owner" && (n.FirstChild == nil || n.FirstChild.Data != want) {
					errs = append(errs, fmt.Errorf("td.owner does not hold %q as text", want))
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return errors.Join(errs...)
}

// The ownership map's rows, written in Go, escape every value: an owner,
// a wanted owner, a group (in the link) holding markup stay text.
func TestMapRowsAreEscaped(t *testing.T) {
	exp := time.Now()
	rows := []partitionRow{{PartitionStatus: admin.PartitionStatus{Partition: 3, Owner: markup, Desired: markup + "2",
		Token: 7, Held: true, ExpiresAt: &exp, Pending: 1, Scheduled: 2}, Reasons: []string{markup}}}
	got := string(rowsHTML(rows, exp, func(p int) string { return `/jobs?group=` + markup }))
	if err := checkRows(got, markup); err != nil {
		t.Errorf("%v:\n%s", err, got)
	}
	if !strings.Contains(got, `<td class="desired">`+html.EscapeString(markup+"2")+`</td>`) {
		t.Errorf("td.desired is not the escaped wanted owner:\n%s", got)
	}
	// Control: the check catches markup written as is.
	raw := `<tr><td class="owner">` + markup + `</td></tr>`
	if checkRows(raw, markup) == nil {
		t.Error("checkRows passed rows holding raw markup")
	}
}
