"""Generates C++ (and optionally gRPC) code from a .proto with the system protoc.

Debian's protoc and grpc_cpp_plugin are used directly (offline build): the rule runs
`protoc` from PATH with the plugin found next to it. Generated headers are included as
"<package path below proto_root>/<name>.pb.h", e.g. "gpucmd/v1/gpucmd.pb.h".
"""

def gpucmd_cc_proto(name, src, proto_root, grpc = False, deps = [], proto_deps = [], import_dirs = []):
    """Declares `name`, a cc_library of the code generated from `src`.

    Args:
      name: the cc_library's name.
      src: the .proto file (a label).
      proto_root: directory (exec path) that protoc's import paths are relative to.
      grpc: also generate gRPC service stubs.
      deps: cc_library targets of protos that `src` imports.
      proto_deps: the .proto files of those imports.
      import_dirs: further protoc -I directories for the imports.
    """
    base = src.split(":")[-1].rsplit("/", 1)[-1][:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    plugin = ""
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
        plugin = ("--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) " +
                  "--grpc_out=$(GENDIR)/proto ")
    includes = " ".join(["-I" + d for d in [proto_root] + import_dirs])
    native.genrule(
        name = name + "_gen",
        srcs = [src] + proto_deps,
        outs = outs,
        cmd = ("protoc " + includes + " --cpp_out=$(GENDIR)/proto " + plugin +
               "$(location " + src + ")"),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        # Generated headers are included relative to proto/, as protoc names them.
        strip_include_prefix = "/proto",
        deps = deps + (["@system//:grpc"] if grpc else ["@system//:protobuf"]),
        visibility = ["//visibility:public"],
    )
