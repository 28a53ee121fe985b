package ui_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/ui"
)

// Mount the UI under /queue of your own server, behind your own
// authentication, with the actions enabled and logged with the user's
// name. The handler removes /queue itself: no http.StripPrefix.
func Example() {
	db, err := pgtest.ExampleDB() // in your code: leasehold.Open(pool, leasehold.Config{})
	if err != nil {
		log.Fatal(err)
	}
	h, err := ui.New(db, ui.Config{
		Path:         "/queue",
		AllowActions: true,
		Actor:        func(r *http.Request) string { return r.Header.Get("X-Auth-User") },
	})
	if err != nil {
		log.Fatal(err)
	}
	// requireAdmin stands for your authentication middleware.
	requireAdmin := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Auth-User") != "alice" {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/queue/", requireAdmin(h))
	// http.ListenAndServe("127.0.0.1:8080", mux)

	for _, user := range []string{"alice", "mallory"} {
		req := httptest.NewRequest(http.MethodGet, "/queue/", nil)
		req.Header.Set("X-Auth-User", user)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(user, rec.Code)
	}
	// Output:
	// alice 200
	// mallory 403
}
