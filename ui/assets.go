package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
)

//go:embed assets
var assetFS embed.FS

// assetVersion changes with the assets' content: the pages link to them
// with it (?v=), so that a browser never keeps an old file after an
// upgrade while caching them otherwise.
var assetVersion = func() string {
	sum := sha256.New()
	fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := assetFS.ReadFile(p)
			sum.Write([]byte(p))
			sum.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(sum.Sum(nil))[:12]
}()

// assetServer serves the embedded assets, cached for a day.
func assetServer() http.Handler {
	sub, err := fs.Sub(assetFS, "assets")
	if err != nil {
		panic(err)
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		files.ServeHTTP(w, r)
	})
}
