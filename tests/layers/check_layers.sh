#!/usr/bin/env bash
# Checks the include arrows of the source tree against its one declared floor order: the
# "One line per room, lowest floor first" list of src/CMakeLists.txt, above the core's public
# headers (ratelimit/, floor 0). A file may include its own folder and the folders below it,
# never one above (with one total order, no two folders can then include each other); a store's
# own folder (stores/NAME/) is entered only from stores/, where stores are chosen. Inside a folder,
# no files include each other in a circle (a header and its .cpp count as one unit). Each file
# declares the namespace of its folder, ratelimit::FOLDER[::SUB] (ratelimit at src/'s root), and
# no other named one (anonymous namespaces are free), but for the exceptions listed below.
# Usage: check_layers.sh SRC_DIR. Prints each wrong arrow and namespace; exits 1 if there is one.
set -euo pipefail
src=${1:?usage: check_layers.sh SRC_DIR}

declare -A floor=([ratelimit]=0 [core]=0)
order=(ratelimit)
in_list=0
while read -r line; do
  if [[ $line == "# One line per room"* ]]; then in_list=1; continue; fi
  ((in_list)) || continue
  [[ $line == add_library* ]] && line=${line#*STATIC}
  read -r first _ <<<"$line"
  [[ -n $first ]] || continue
  folder=${first%%/*}
  if [[ $first =~ ^[a-z_]+/ && -z ${floor[$folder]+set} ]]; then
    floor[$folder]=${#order[@]}
    order+=("$folder")
  fi
  [[ $line == *")" ]] && break
done <"$src/CMakeLists.txt"
((${#order[@]} > 1)) || { echo "no room list in $src/CMakeLists.txt" >&2; exit 1; }

# A file's unit: its folder and name without the extension (x.hpp, x.cpp, x.cpp.in: x).
unit_of() {
  local name=${1##*/}
  echo "${1%/*} ${name%%.*}"
}

# The folders and files whose namespace is not their folder's, each with its reason.
declare -A namespace_of_folder=(
  # The core implements the public API of include/ratelimit/, which is `ratelimit` itself
  # (design.md, "public core API").
  [core]=ratelimit
)
declare -A files_without_namespace=(
  # main() is global; its helpers are in an anonymous namespace.
  [cli/main.cpp]=1
)

# Checks that `relative` declares its folder's namespace and no other named one.
check_namespace() {
  local relative=$1 folder expected declared
  folder=$(dirname "$relative")
  if [[ $folder == . ]]; then
    expected=ratelimit
  else
    expected=${namespace_of_folder[$folder]:-ratelimit::${folder//\//::}}
  fi
  declared=$(sed -n 's/^[[:space:]]*\(inline[[:space:]]\+\)\?namespace[[:space:]]\+\([A-Za-z_][A-Za-z0-9_:]*\)[[:space:]]*{.*/\2/p' \
    "$src/$relative" | sort -u)
  if [[ -z $declared && -z ${files_without_namespace[$relative]+set} ]]; then
    echo "$relative: declares no namespace; its folder's is $expected"
    wrong=1
  fi
  local name
  for name in $declared; do
    if [[ $name != "$expected" ]]; then
      echo "$relative: namespace $name; its folder's is $expected"
      wrong=1
    fi
  done
}

wrong=0
# Per folder, the arrows between its units ("from to" lines), for tsort to find circles in.
declare -A arrows_in=()
while IFS= read -r -d '' file; do
  relative=${file#"$src"/}
  check_namespace "$relative"
  [[ $relative == */* ]] || continue  # errors.hpp: below every folder
  read -r folder from_unit < <(unit_of "$relative")
  while IFS= read -r included; do
    # A name without a folder is found beside the file first (then in src/: errors.hpp).
    [[ $included == */* ]] || included=$folder/$included
    [[ -e $src/$included ]] || continue
    read -r included_folder to_unit < <(unit_of "$included")
    if [[ $included_folder == "$folder" && $to_unit != "$from_unit" ]]; then
      arrows_in[$folder]+="$from_unit $to_unit"$'\n'
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
  from=${relative%%/*}
  if [[ -z ${floor[$from]+set} ]]; then
    echo "$relative: folder '$from' is not in the room list of src/CMakeLists.txt"
    wrong=1
    continue
  fi
  while IFS= read -r included; do
    to=${included%%/*}
    if [[ -z ${floor[$to]+set} ]]; then
      echo "$relative: includes \"$included\": folder '$to' is not in the room list"
      wrong=1
    elif ((floor[$to] > floor[$from])); then
      echo "$relative: includes \"$included\": '$to' is a floor above '$from'" \
        "(order: ${order[*]})"
      wrong=1
    elif [[ $included == stores/*/* && $from != stores ]]; then
      echo "$relative: includes \"$included\": a store's folder is entered only from stores/"
      wrong=1
    elif [[ $included == stores/*/* && $relative == stores/*/* ]]; then
      included_store=${included#stores/}
      file_store=${relative#stores/}
      if [[ ${included_store%%/*} != "${file_store%%/*}" ]]; then
        echo "$relative: includes \"$included\": one store's folder never includes another's"
        wrong=1
      fi
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\/[^"]*\)".*/\1/p' "$file")
done < <(find "$src" \( -name '*.hpp' -o -name '*.cpp' -o -name '*.cpp.in' \) -print0)

for folder in "${!arrows_in[@]}"; do
  if ! circle=$(printf '%s' "${arrows_in[$folder]}" | tsort 2>&1 >/dev/null); then
    echo "$folder: files include each other in a circle:" \
      "$(sed -n 's/^tsort: \([^:]*\)$/\1/p' <<<"$circle" | tr '\n' ' ')"
    wrong=1
  fi
done
exit "$wrong"
