module github.com/scc-dev/scc/interop/hdf5

go 1.26.0

require (
	github.com/klauspost/compress v1.20.3
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/scc-dev/scc v0.0.0
	github.com/stretchr/testify v1.12.1
	golang.org/x/sync v0.24.0
)

require (
	github.com/DataDog/zstd v1.5.7 // indirect
	github.com/alphadose/haxmap v1.4.0 // indirect
	github.com/panjf2000/ants/v2 v2.12.1 // indirect
	github.com/puzpuzpuz/xsync/v3 v3.5.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/exp v0.0.0-20221031165847-c99f073a8326 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/scc-dev/scc => ../..
