package h5

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Filters that libhdf5 does not build in (LZ4, BZip2, Bitshuffle, LZF,
// Blosc, ZFP, ...) are decoded by plugins, shared libraries libhdf5 loads
// from the directories of its plugin search path the first time a chunk
// needs one. That path is HDF5_PLUGIN_PATH when it is set (libhdf5 reads
// it once, at initialization), else the directory the library was built
// with. Debian's plugin packages (hdf5-filter-plugin, bitshuffle,
// hdf5-plugin-lzf, hdf5-filter-plugin-blosc-serial,
// hdf5-filter-plugin-zfp-serial; `make interop-hdf5-deps`) install into
// the serial library's plugin directory, which Debian builds in; a
// libhdf5 built elsewhere does not know it, so when HDF5_PLUGIN_PATH is
// unset the binding appends that directory to the search path (if it
// exists and is not already there). Setting HDF5_PLUGIN_PATH overrides
// that: the path is then exactly what the user said.
//
// The binding then loads every plugin of the path itself, once, and
// registers its filter (the first library of a filter id wins, in path
// order and then by file name), instead of leaving the search to libhdf5:
// libhdf5 1.10 stops its search at the first library it cannot load, so
// one broken plugin hides every plugin after it. Debian 12's
// hdf5-plugin-lzf is one (liblzf_filter.so lacks its liblzf symbols);
// bitshuffle's libh5LZF.so decodes LZF. A library that cannot be loaded
// is skipped and named by BrokenPlugins.

var pluginsOnce sync.Once

// debianTriplets are Debian's multiarch directory names.
var debianTriplets = map[string]string{
	"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "386": "i386-linux-gnu",
	"arm": "arm-linux-gnueabihf", "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu",
	"riscv64": "riscv64-linux-gnu", "mips64le": "mips64el-linux-gnuabi64", "loong64": "loongarch64-linux-gnu",
}

// DebianPluginDir is the directory Debian's serial libhdf5 filter plugins
// are installed in on this architecture ("" where Debian has none).
func DebianPluginDir() string {
	t, ok := debianTriplets[runtime.GOARCH]
	if !ok {
		return ""
	}
	return "/usr/lib/" + t + "/hdf5/serial/plugins"
}

// brokenPlugins names the plugin libraries that could not be loaded.
var brokenPlugins []string

// addPluginDirs appends DebianPluginDir to the plugin search path when
// HDF5_PLUGIN_PATH is unset, and registers the filters of the plugins of
// the path. Caller holds lib.
func addPluginDirs() {
	if _, set := os.LookupEnv("HDF5_PLUGIN_PATH"); !set {
		appendDebianDir()
	}
	for _, dir := range pluginPath() {
		// "@default" stands for the built-in directory in
		// HDF5_PLUGIN_PATH; the expanded path holds it already.
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		names := make([]string, 0, len(ents))
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".so") {
				names = append(names, e.Name())
			}
		}
		slices.Sort(names)
		for _, n := range names {
			p := filepath.Join(dir, n)
			cs := C.CString(p)
			var why *C.char
			if C.scc_register_plugin(cs, &why) < 0 {
				msg := "cannot be loaded"
				if why != nil {
					msg = C.GoString(why)
					C.free(unsafe.Pointer(why))
				}
				brokenPlugins = append(brokenPlugins, fmt.Sprintf("%s: %s", p, msg))
			}
			C.free(unsafe.Pointer(cs))
		}
	}
}

// BrokenPlugins names the plugin libraries of the search path that could
// not be loaded, each with the loader's reason.
func BrokenPlugins() []string {
	lock()
	defer unlock()
	return slices.Clone(brokenPlugins)
}

func appendDebianDir() {
	dir := DebianPluginDir()
	if dir == "" {
		return
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return
	}
	for _, d := range pluginPath() {
		if d == dir {
			return
		}
	}
	cs := C.CString(dir)
	defer C.free(unsafe.Pointer(cs))
	C.H5PLappend(cs)
	C.H5Eclear2(C.H5E_DEFAULT)
}

// pluginPath is libhdf5's plugin search path. Caller holds lib.
func pluginPath() []string {
	var n C.uint
	if C.H5PLsize(&n) < 0 {
		C.H5Eclear2(C.H5E_DEFAULT)
		return nil
	}
	var dirs []string
	for i := C.uint(0); i < n; i++ {
		var buf [4096]C.char
		if C.H5PLget(i, &buf[0], C.size_t(len(buf))) < 0 {
			C.H5Eclear2(C.H5E_DEFAULT)
			continue
		}
		dirs = append(dirs, C.GoString(&buf[0]))
	}
	return dirs
}

// PluginPath is the directories libhdf5 looks for filter plugins in, in
// order (see the comment at the top of this file).
func PluginPath() []string {
	lock()
	defer unlock()
	return pluginPath()
}
