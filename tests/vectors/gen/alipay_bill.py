#!/usr/bin/env python3
# alipay_bill.py - Alipay's trade bill (业务明细) for the unit tests, in the
# layout the SDKs' bill readers take (docs/reconcile.md quotes it and its
# sources): GBK, CRLF, '#' header and footer lines, 25 columns, a tab after
# the id and text values, refunds as their own negative rows.  Writes
# ../alipay_bill/detail.csv (the detail file) and bill.zip (the zip Alipay
# serves: the detail file and its summary, entry names in GBK, deflated).
#
#   python3 tests/vectors/gen/alipay_bill.py
#
# Fixed inputs and a fixed zip time: a regeneration gives the same bytes.
import os
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "alipay_bill")
PID = "20880211096256330156"
DAY = "20261205"

COLUMNS = ("支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,"
           "终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,"
           "支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,"
           "卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注")


def row(trade_no, order, kind, name, created, done, amount, received, request_no, fee):
    t = "\t"
    return ",".join([trade_no + t, order + t, kind + t, name, created, done, "lane-1" + t,
                     "门店一号" + t, "alipay" + t, t, "*津水(602***@qq.com)" + t, amount,
                     received, "0.00", "0.00", "0.00", "0.00", "0.00", "", "0.00" + t, "0.00",
                     request_no + t, fee, "0.00", name])


ROWS = [
    # A latte of 12.34, 0.34 of it an Alipay red packet: 商家实收 12.00.
    row("2026120522001458860515315453", "LANE1-0001", "交易", "拿铁", "2026-12-05 09:30:00",
        "2026-12-05 09:30:01", "12.34", "12.00", "", "-0.07"),
    # Its refund of 5.00 at 18:02 (创建时间 stays the trade's).
    row("2026120522001458860515315453", "LANE1-0001", "退款", "拿铁", "2026-12-05 09:30:00",
        "2026-12-05 18:02:44", "-5.00", "-5.00", "LANE1-0001-R1", "0.03"),
    # A payment a second before midnight.
    row("2026120522001458860515315454", "LANE1-0002", "交易", "Tea", "2026-12-05 23:59:58",
        "2026-12-05 23:59:59", "0.01", "0.01", "", "0.00"),
    # Money taken at the shop's 收钱码, with no merchant order.
    row("2026120522001458860515315455", "", "交易", "收钱码收款", "2026-12-05 12:00:00",
        "2026-12-05 12:00:03", "8.00", "8.00", "", "-0.05"),
]

DETAIL = "\r\n".join([
    "#支付宝业务明细查询",
    "#账号：[%s]" % PID,
    "#起始日期：[2026年12月05日 00:00:00]   终止日期：[2026年12月06日 00:00:00]",
    "#-----------------------------------------业务明细列表----------------------------------------",
    COLUMNS,
] + ROWS + [
    "#-----------------------------------------业务明细列表结束------------------------------------",
    "#交易合计：3笔，商家实收共20.01元，商家优惠共0.00元",
    "#退款合计：1笔，商家实收退款共-5.00元，商家优惠退款共0.00元",
    "#导出时间：[2026年12月06日 05:46:49]",
]) + "\r\n"

SUMMARY = "\r\n".join([
    "#支付宝业务汇总查询",
    "#账号：[%s]" % PID,
    "#起始日期：[2026年12月05日 00:00:00]   终止日期：[2026年12月06日 00:00:00]",
    "#-----------------------------------------业务汇总列表----------------------------------------",
    "门店编号,门店名称,交易订单总笔数,退款订单总笔数,订单金额（元）,商家实收（元）,支付宝优惠（元）,"
    "商家优惠（元）,卡消费金额（元）,服务费（元）,分润（元）,实收净额（元）",
    "lane-1\t,门店一号\t,3,1,15.35,15.01,0.00,0.00,0.00,-0.09,0.00,14.92",
    "合计,,3,1,15.35,15.01,0.00,0.00,0.00,-0.09,0.00,14.92",
    "#----------------------------------------业务汇总列表结束-------------------------------------",
    "#导出时间：[2026年12月06日 05:46:49]",
]) + "\r\n"


class GbkName(zipfile.ZipInfo):
    """An entry named in GBK without the UTF-8 flag, as Alipay's are."""

    def _encodeFilenameFlags(self):
        return self.filename.encode("gbk"), self.flag_bits & ~0x800


def entry(name, data, z):
    info = GbkName(name, date_time=(2026, 12, 6, 5, 46, 49))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 0
    z.writestr(info, data.encode("gbk"))


os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "detail.csv"), "wb") as f:
    f.write(DETAIL.encode("gbk"))
with zipfile.ZipFile(os.path.join(OUT, "bill.zip"), "w") as z:
    entry("%s_%s_业务明细.csv" % (PID, DAY), DETAIL, z)
    entry("%s_%s_业务明细(汇总).csv" % (PID, DAY), SUMMARY, z)
