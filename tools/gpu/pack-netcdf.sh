#!/usr/bin/env bash
# Packs this machine's libnetcdf for the GPU machine, whose image has no NetCDF (and no apt):
# the library, the shared libraries it needs beyond the C runtime, its headers and a
# netcdf.pc, into .gpu/netcdf.tar.xz (~16 MB). tools/gpu-session.sh unpacks it when it is
# there and builds brisk with NetCDF, so that the meshgnn example runs on the GPU:
#   tools/gpu/pack-netcdf.sh        # then carry .gpu with the device call
# (tools/gpu/pack-debs.sh would need the whole Debian dependency chain: curl, gnutls, krb5, icu, ...)
set -euo pipefail
cd "$(dirname "$0")/../.."
lib=$(pkg-config --variable=libdir netcdf)/libnetcdf.so
[ -e "$lib" ] || { echo "pack-netcdf: no libnetcdf here (apt-get install libnetcdf-dev)" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/nc/lib/pkgconfig" "$work/nc/include" .gpu
real=$(readlink -f "$lib"); soname=$(objdump -p "$real" | awk '/SONAME/ {print $2}')
cp -L "$real" "$work/nc/lib/$soname"; ln -s "$soname" "$work/nc/lib/libnetcdf.so"
# the C runtime and zlib are on every image; everything else libnetcdf pulls in travels
ldd "$real" | awk '$3 ~ /^\// {print $3}' | while read -r dep; do
  case $(basename "$dep") in libc.so*|libm.so*|libstdc++*|libgcc_s*|libresolv*|libz.so*|libpthread*|libdl.so*) ;;
    *) cp -L "$dep" "$work/nc/lib/" ;; esac
done
cp "$(pkg-config --variable=includedir netcdf)"/netcdf*.h "$work/nc/include/"
cat >"$work/nc/lib/pkgconfig/netcdf.pc" <<PC
prefix=@PREFIX@
libdir=\${prefix}/lib
includedir=\${prefix}/include
Name: netCDF
Description: NetCDF, carried to the GPU machine (tools/gpu/pack-netcdf.sh)
Version: $(pkg-config --modversion netcdf)
Libs: -L\${libdir} -lnetcdf
Cflags: -I\${includedir}
PC
tar -C "$work" -cJf .gpu/netcdf.tar.xz nc
echo "packed $(ls "$work/nc/lib" | grep -c '\.so') libraries into .gpu/netcdf.tar.xz ($(du -h .gpu/netcdf.tar.xz | cut -f1))"
