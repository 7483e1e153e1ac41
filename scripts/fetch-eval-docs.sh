#!/usr/bin/env bash
# Fetches the second retrieval-quality corpus, the English HTML edition of "The Debian
# Administrator's Handbook" (113 pages, ~2.2 MB of HTML, ~1.15 MB of visible text), and prints
# the directory that holds the pages. Idempotent: a second run only checks and prints the path.
#
# Source: the Debian package debian-handbook 11.20220922 (bookworm main, architecture all),
# fetched with `apt-get download` and unpacked with `dpkg-deb -x`; we copy
# usr/share/doc/debian-handbook/html/en-US/*.html flat into one directory, leaving out
# index.html (the table of contents) and the 13 pages with under 1,000 characters of visible
# text (short derivative-distribution blurbs). Nothing under Common_Content/ or images/ is kept.
#
# Pinning: the package version and the .deb's sha256 are pinned, and so is every copied page
# (the manifest below). Debian's archive serves only the current version of a suite, so if
# bookworm ever replaces 11.20220922, `apt-get download` fails and this script says so; the
# per-page sums then tell whether a newer .deb carries the same pages (set
# CAIRN_EVAL_DOCS_ANY_VERSION=1 to accept any version whose pages all match the manifest).
#
# Licence: the handbook is by Raphaël Hertzog and Roland Mas, GPL-2+ or CC-BY-SA-3.0. We never
# commit the pages; they land in ${CAIRN_TEST_DATA:-/var/tmp/cairn-test-data}/debian-handbook/.
#
# Usage:  CAIRN_EVAL_DOCS="$(scripts/fetch-eval-docs.sh)" cargo test ...
#         labels: tests/fixtures/retrieval/handbook_queries.json (files named by basename)
set -euo pipefail

# shellcheck source=scripts/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

data_dir="${CAIRN_TEST_DATA:-/var/tmp/cairn-test-data}"
mkdir -p "$data_dir"
data_dir="$(cd "$data_dir" && pwd)"
dest="$data_dir/debian-handbook"
pkg=debian-handbook
version=11.20220922
deb="${pkg}_${version}_all.deb"
deb_sha256=3d5dbeac1f1afc9c094eab9d0f701f6ecff99c4927d5a4794cf6c85678134faa
src=usr/share/doc/debian-handbook/html/en-US

# sha256 and name of every page we keep (113 files).
manifest() {
  cat <<'SUMS'
9a3fe66c539b1ce7ea68744067d6544bde65fd97a68743bd4190204aa48f7442  advanced-administration.html
009abb91ab3829abfe5ce030745bb283cfa911b8c26b2379b5e2c2d480e31c8d  apt.html
57d85c30ee07c65943876829708d09dfcdb55f1734fa2736d5ea6f263063a07e  basic-configuration.html
3e2bb174a3901d8b146adfbc50817a4ad615e5357af97e36a236183ac659881d  case-study.html
3bf9e41ed2fd36d26574a2126588a83afb0373cfa690b85b4370606e2294a679  conclusion.html
1499aea33e9450f052dbc798efc91d3deaeb49055efd03abd321c3eb171f742c  debian-packaging.html
88fd84de2ddf7d9db797c5c33999bd11e25ae1671f4e1b0b4e3eceb64ab74488  derivative-distributions.html
ad2fbff060242b7c66062f361b38a5486915d7158e59279b2f100fd57262e171  existing-setup.html
95b3b4c2cbf116f441c4f91bbdd6d2b7ada095fc117881b7ec3139f733c6c142  foreword.html
e29e4b0ac19d0afc0c450e2af09ef2821781cbb450f4c16615ea21bd066a1d8b  installation.html
5182a91c7a9523acb9168ea8929012b60547a816b9325dd8e1fefe8799d452a5  network-infrastructure.html
c617813e0c7e177af44dd4686ed495b4244a6402b98572d73db924b45130e197  network-services.html
2a7d6703fd07f120e1fa3b4a2dcd9831221260ec51a9f63040502498cd54bcc5  packaging-system.html
d3128eb43ec053f1bb5c1eb15d7604d7755dc93c114c5b8a28cc8c7489fe38ae  preface.html
ae6d4e862f8d884acc115e3923d05ed6abb7a3d137c7c185d8f8fc5f1a3083af  sect.acknowledgments.html
1b09f978422301748dad1f57afa9e3c3e2ae122b92f19db419fdcf8d356d16a2  sect.administration-interfaces.html
c1d3975f1616b781a095f7e9aae73bce3aa110f19764a9926c710269e6661865  sect.after-first-boot.html
c524bf52267a815c29e5159b36d7ad4723c055a3d1a94ac7aef2c0a318fbf804  sect.apparmor.html
bcd399a5dcfb662e2ba0889a970fccab2eb6916f780fd204e1d18b7e8d97f3c9  sect.apt-cache.html
1659a0d4805a9b2b0dc768ae9e943c87d6583a02f527c0a8206c9dd175912965  sect.apt-file.html
15e75db0adfb2c483b34f0ee81fa56e7fc6672a9856e029a56f02b9713cf3559  sect.apt-frontends.html
4bd6f555bcd785c7c02cf1da2f200af21ad8f8b2f2ef136b70a5dd20d61aa3ce  sect.apt-get.html
d9f2ffd656973a2fe7f363b163ef837c415befbf46fa0127770cfef1d026b93f  sect.asynchronous-task-scheduling-anacron.html
4163d0eed013ba7ef5c14084d486bd33519fa9f0e472355d3746cc8cb6f93618  sect.automated-installation.html
4f3e9ea4fe3e2f13d6ad79077856ed6a7f9cc0a4a55f5e742dcfccdca1a20de8  sect.automatic-upgrades.html
9768cfd7dd339919af8905c144e0a57951bbfee8d0dd223e1200491093b943c3  sect.backup.html
22619dc7fda4279c18b14bb60d1f0273a0df6eccb31336c41da482646f7d4afe  sect.becoming-package-maintainer.html
e4b9d584b3fb34b0e2afa5f25fc0ecda7047bf167bc0bf5ae6a2869351b4563f  sect.book-structure.html
f69bffe930fd02d15c309a47cc764f819a98b4f0a878542945cd4e063663227c  sect.building-first-package.html
40ff839a9b414707e2663982d3ab94b33ca15745e210048a0b7a3441703b1309  sect.coexistence-with-other-packaging-systems.html
4d3f2f7cb7a01eec9a943ea1c25f8d7ce53541e720279eba6707d0e939592992  sect.common-procedures.html
ab80fe70b7e0df6fa00926b77b9567e9ea8bb9b34c6f3360b2f898f2bdc54ccf  sect.computer-layers.html
96138bb47a1fda955ad5128a5614fbe307d700b08d349fcfd13f9e590087bbba  sect.config-bootloader.html
0bb2bf563826438db37d97d918ed2237de3a9c13562fc22abee1faf81c1d48dd  sect.config-misc.html
61d39ff8e7c33dcc037ba738d3e656152b1bd20fff4769e061700163e5e1f7ab  sect.config-printing.html
878824d7c490e8872d9ad261769195d626c5e0906c7e3213d147c5a83867b89e  sect.creating-accounts.html
7978cf13f0404bb573ba43fc05475d6121f57f68afcb105cfb9e4addea5cf46c  sect.customizing-graphical-interface.html
4b55ebda7c74b6a65cc2f60c2d8d5ca3912402d7308230e26a19f51de131e5a3  sect.dealing-with-compromised-machine.html
6ca2f80cf0b9ff40d3c192c2c1f570b77895995a5455dd414cdc0acdb769391b  sect.debian-internals.html
e4990d3c15d7fb86bf9e971b80e393d6bf6f54dadfc73bd887a042677528cf17  sect.development.html
c95b0fc6f395fcc621068ef7cdccbc34cefe4bd74654926846d3b9c8f345e718  sect.dhcp.html
92f1c48cb30d7df41176a16b7d01af8f82fb717056b6e2c4658ed3728696e93a  sect.dist-upgrade.html
b6a82cba5c5611ecbdbc16f112dee5bec56b1fa1c4319bc1ab394e0f5c25e5a3  sect.domain-name-servers.html
bddf558667feeaf5eb3592866199908451db03c9b5faf1724bc391944f1f4a9a  sect.dynamic-routing.html
e820af86598eb0afc54e20e5d17b1f394c20d8478e53eb99c3317b50cbad8ecf  sect.filesystem-hierarchy.html
c7a65901402d0df13729605d4f58c9380637abf21e9b305645de56fafd972f15  sect.firewall-packet-filtering.html
c0d79e0423e0f09700e7357f4d848d6e6fc8139b7f90ffe3c78b09b92d862dd0  sect.follow-debian-news.html
25f98bdf10fba04a8ae55024ff2d667d3547bbe28f2078e5cab920a4152c8362  sect.foundation-documents.html
0f2f250a938b993e5f2f17982adc6d28fa03ee431ecd1b35b5c0e04e2d28d8cf  sect.ftp-file-server.html
52917d1b5745a53cab1da4db732eb5a9ceec09a202596f7ebbf4d6e9de41c396  sect.future-of-debian.html
a1da5fa029bb5cba7c5b215c83644591cd08f49338b10e98aefad1dcfa9ac253  sect.future-of-this-book.html
9c6f73a3401a683f44c028c66ebde0b4518d76f7942955e6aff691d18a9e8bb4  sect.graphical-desktops.html
d8aad89f5efae44f1cefc6746fcc39d070d31c7d75bf133b5dd65b7d718f8f0f  sect.hostname-name-service.html
9bfb92ec7da8305fe5a80edfbb4040f42d0bde6b1084069e34202c5995dc4af5  sect.hotplug.html
793ab5cc288ee09ff70642eb0404f6dd1633b8ed9c055198ea86467b9f37893a  sect.how-to-migrate.html
6974e247e8839a5faf668c3c3ec26e2d985b8a1cfbfb7f66093641f36d89e745  sect.http-ftp-proxy.html
3cce01aea8e9c10733998f2f40e393a3d2d10df3e4448390da7b78c9bca2d0c1  sect.http-web-server.html
f59eb803216fd3572936ecf58bb66e92b9952da7a428d4f5b9cd464007e38e00  sect.inetd.html
ff7800d42fa2132cfe8989df821e5ac75a5563a57a90b5f2c95351356f78f4d5  sect.installation-steps.html
7b3d523d1547abd99b4c4b7852c4c83313c545fd8c4fff24513537c73da29adb  sect.ipv6.html
011f7ebc574be0ff62bda163cfb49ddf3b2ea5a325b83614924d8dbd070163c0  sect.kernel-compilation.html
b1053ad94ba8f04ad6f256624b078dd11267d07e6ac7f40a370c947298e487fe  sect.kernel-installation.html
fd9362b660cfc5bd7d1d34412b551296076b9dd3c46c921fe6e1422f475b982f  sect.kernel-role-and-tasks.html
cd3f71662918e8268a394ef2ad89ff7266af29578cb8682f13b7a91bfa8dcaae  sect.knoppix.html
1240c795695ef4d3f83db53cef919eaf22aac37f91d3d39b9c0c9864dcca6060  sect.ldap-directory.html
bf0d46ba5ac95ad37c746ac5026c362ae423774ca5dfcb192f3ab209a706ea6f  sect.linux-mint.html
0b12f86bc7292eaa353d828da4cf5bda27f3a2d5a4f432d0649042348625a405  sect.main-desktop-tools.html
de24e111d8ba0f6ac551d93fe04ccb0d4e077663aaba37e34fabe76a10f358c3  sect.manipulating-packages-with-dpkg.html
430cd48cdcc0a9be0fe987254b253a4be0f61647dbeb4e905a368005277ea914  sect.master-plan.html
e119beac77e8cdf6fd2ccec9998604360fccdb4c2d00219aef514746ca57997c  sect.monitoring.html
967119d18f4cd7c3b03fbe1daaad12c1d7351ce37f39e66b37c5bab9e34a0721  sect.network-config.html
bcb4c52c1fc5d94072d7bfbea2eaad4be3ef0cf59a70f0249dd1ddb8bf7e0a21  sect.network-diagnosis-tools.html
f8854e4f35d0ba18eb27ee22e975f546f03db98aa3740f6b2eb1596fcae01900  sect.nfs-file-server.html
00e7afa682549d3521465f8225a2bed5f3cfb27abcfd9a804faf9c865aad048b  sect.office-suites.html
f2c01ad46979d1ecb4043ed783b46c47cabb7941de4638da008ee94d7457c7a5  sect.other-security-considerations.html
d1a33e87bfc28297d534cf0642753de587bcbd2faf837864556baded9b73a4be  sect.package-authentication.html
556a8a000fe695edb1607fd8750a49e6e224e1b653b6b2a592d9ba89424bee41  sect.package-meta-information.html
c413e3fe64fd9fb10aa41b77a3e298fbc1cda8621a87d593d424405908a04f49  sect.power-management.html
69728feeab6af0fd7f764c821a1c565128e80e57b14603f2cfce23c1ed3ad720  sect.quality-of-service.html
dd83584ee2b21c65f1a9fa6b85053f7a9edeb06d06c820534a6eed569955aa78  sect.quotas.html
eeb01254ba202ba94e7ce642fe70727949b3dbfa3dfcd8e11abebceffb8cabd1  sect.regular-upgrades.html
6105693f4c714280af396d739c4fe38bd4cc7c320c676c7e33c558ca36f2a63f  sect.release-lifecycle.html
1a9ff3f19ce35f83d6df0a310af694fe8da1d0463580f3a235965c867e42644d  sect.remote-login.html
dbc486779ea94da0381b0d80146293cd2bff70feb11917a07c07d75b49fdb3f1  sect.rights-management.html
bb970cbcaa73e3b26004dd996a4872131f8c165928eac31504a9d7d5ee45a8bf  sect.role-of-distributions.html
0c104c8d0a93bc954893dee31e7009bf7737b3b12721584fe33539c76e229eae  sect.rtc-clients.html
3775742d1f84052969515f09f4def3ac691b7027750590cf965f9798aca7c028  sect.rtc-services.html
76c8e0cafa76883ec3b198d3706fc1855d0f39cbd266760861187566ca8ca19e  sect.searching-packages.html
544cdabafc33fe6ab3f99267bd8079032889a090a90dd3aa8894fd0ca2b09f63  sect.selinux.html
ca0d43324b0cf03fa9b3699476104f4129a1d6b49d82d3517f839405e29ea2bd  sect.setup-apt-package-repository.html
c8fa95675e9bf2b3f3ee248209c9f990bd591739f903a50a64ec4c525da8a59f  sect.shell-environment.html
86b57e36cad067da86d57f30727f16243044e15125995a812823fd266e20288c  sect.source-package-structure.html
cddabd2a75b470617bb9c58c0445b9cbac9cbf8b6278339cb133f21f9d4b212c  sect.supervision.html
2f41c7b692ab5fd1006c659bdcc8d1983aa2c0b13ad2975e98cffec8efe01227  sect.syslog.html
27ce3350de1b4e2caf22505c09161168496c7e25c10c2d25f8ccbd738216afe7  sect.task-scheduling-cron-atd.html
cd0619c2163954c4e7eb75b7302ddc5458bb96269496d186cd66395806b39034  sect.ubuntu.html
a665363101920ba9271aedfe2852810054e014257bbed331fa3dee7dbe44cb0e  sect.user-group-databases.html
253672d68d7552da3f0522217f69517c017bbf03f993530203b7ef2e134eb122  sect.user-space.html
316b82cc080d3ef9692cc08bbfa7ce52cd5595c91aebc56a51deb10e04e12fba  sect.virtual-private-network.html
cae7f8f37c1f5e0391207727f8c32469de4443cda8db482465846e97907e4de6  sect.virtualization.html
0c8a7c94dd3b4c1548c8f2fac014931a633eac83aafb3e0ea2e364a6aef87bef  sect.web-browsers.html
f6afb26e20d45ba99406c924e35e69d28dddcae58c5f8bc39b98f52a243718f8  sect.who-is-this-book-for.html
acd11f5ad066dab2008b79b5dd728de8c8994c099fd1dbc929818721251f33e5  sect.why-debian.html
683b5b138595c1957edbd71bc3cf3b5f930bb13b273263048d21118167121e7d  sect.why-gnu-linux.html
a8405e430027e012d85e766cf0866c90b9c6f64c5216811dce3b510e03ea254d  sect.windows-emulation.html
063932570459f5d74335cd010b2e0e3e5b23dc4d01b42831c0b88bf248d39203  sect.windows-file-server-with-samba.html
968acd5e0f3426d2498ca6e51c83ceaf5443e2b1aa76ea03442b7580f2cb75e4  sect.x509-cert.html
655feeb2f2785df98f6e95910d75a07980c908f946d5345cf4bfcab43a72486a  security.html
d102039f8d8bea2ee4254f3b0e8a0225f4b8eed69a796ae5588093272a728b9b  short-remedial-course.html
8e09fd881110c317755e03e39cacd0fa988af48af3842506a76b9e663db157ef  solving-problems.html
e3d7c4e970d7f8849f17c412f51d01d0a307ad3139513ace7f29d80c5d00d7f4  the-debian-project.html
7fbcb24735365c94dc706443fa5cc6120576ac098f274d6bf874277071db2a60  unix-services.html
7ded94b6171e4b247bc5044be101f465ad8b4b647baceffab15b89bbd76e0455  workstation.html
SUMS
}

# The directory is good when it holds exactly the manifest's files, each with its sum.
is_good() {
  local dir="$1"
  [ -d "$dir" ] || return 1
  [ "$(find "$dir" -maxdepth 1 -type f -name '*.html' | wc -l)" -eq "$(manifest | wc -l)" ] || return 1
  (cd "$dir" && manifest | sha256sum -c --quiet - >/dev/null 2>&1)
}

if is_good "$dest"; then
  echo "$dest"
  exit 0
fi

command -v dpkg-deb >/dev/null || { echo "fetch-eval-docs: dpkg-deb not found (needs a Debian system)" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "fetch-eval-docs: apt-get not found (needs a Debian system)" >&2; exit 1; }

work="$(mktemp -d "$data_dir/.fetch-docs.XXXXXX")"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work" # apt-get download drops to the _apt user where it can

# apt needs package lists; fetch them once if this version is unknown (fresh machine).
if ! apt-cache show "$pkg=$version" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    log "fetch-eval-docs: apt-get update ..."
    apt-get update -qq >&2 || true
  fi
fi

if [ "${CAIRN_EVAL_DOCS_ANY_VERSION:-0}" = 1 ]; then want="$pkg"; else want="$pkg=$version"; fi
log "fetch-eval-docs: downloading $want (~35 MB) from Debian's archive ..."
if ! (cd "$work" && apt-get download -q "$want" >&2 2>"$work/apt.err"); then
  cat "$work/apt.err" >&2
  echo "fetch-eval-docs: could not download $want; the pinned version may no longer be in the" >&2
  echo "archive (see 'apt-cache policy $pkg'). Retry with CAIRN_EVAL_DOCS_ANY_VERSION=1: the" >&2
  echo "per-page sha256 manifest still decides whether its pages are the labelled ones." >&2
  exit 1
fi
got="$(find "$work" -maxdepth 1 -name "${pkg}_*_all.deb" | head -n 1)"
[ -n "$got" ] || { echo "fetch-eval-docs: apt-get download left no ${pkg} .deb" >&2; exit 1; }
if [ "$(basename "$got")" = "$deb" ]; then
  echo "$deb_sha256  $got" | sha256sum -c --quiet - >&2 \
    || { echo "fetch-eval-docs: sha256 mismatch for $deb" >&2; exit 1; }
else
  log "fetch-eval-docs: got $(basename "$got") instead of $deb; checking its pages against the manifest"
fi

dpkg-deb -x "$got" "$work/x"
mkdir -p "$work/out"
manifest | while read -r _sum name; do
  [ -f "$work/x/$src/$name" ] || { echo "fetch-eval-docs: $src/$name missing from $(basename "$got")" >&2; exit 1; }
  cp "$work/x/$src/$name" "$work/out/$name"
done
is_good "$work/out" || {
  (cd "$work/out" && manifest | sha256sum -c --quiet - >&2) || true
  echo "fetch-eval-docs: pages differ from the pinned manifest" >&2
  exit 1
}
rm -rf "$dest"
mv "$work/out" "$dest"
chmod 755 "$dest"
log "fetch-eval-docs: $(manifest | wc -l) pages in $dest"
echo "$dest"
