// Command minio-run starts the pinned MinIO server (built by `make minio`)
// on a loopback address with a bucket ready, prints the environment that
// points scctl at it, and runs until interrupted: `make minio-run`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/scc-dev/scc/vfd/s3/s3test"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "address to listen on")
	dir := flag.String("data", ".minio-data", "data directory (kept between runs)")
	bucket := flag.String("bucket", "scc", "bucket to create if missing")
	flag.Parse()
	if err := run(*addr, *dir, *bucket); err != nil {
		fmt.Fprintln(os.Stderr, "minio-run:", err)
		os.Exit(1)
	}
}

func run(addr, dir, bucket string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	srv, err := s3test.StartAt(filepath.Join(abs, "data"), addr)
	if err != nil {
		return err
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.MakeBucket(ctx, bucket); err != nil {
		if resp := minio.ToErrorResponse(err); resp.Code != "BucketAlreadyOwnedByYou" && resp.Code != "BucketAlreadyExists" {
			return err
		}
	}
	fmt.Printf(`MinIO %s is serving on http://%s (data in %s); Ctrl-C stops it. Try:

  export AWS_ENDPOINT_URL=http://%s AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s
  scctl ingest --file s3://%s/demo.scc
  scctl ls s3://%s/demo.scc
  scctl check s3://%s/demo.scc
`, s3test.Version(), addr, abs, addr, s3test.AccessKey, s3test.SecretKey, bucket, bucket, bucket)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}
